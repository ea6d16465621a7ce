"""Edited copies of replication packages, for the tests that check what the import
refuses beyond the files' hashes (a schema error, a nested study, a bad score).

Every file of a package carries its SHA-256 in ``datapackage.json``, so an edited file
is refused for that before anything else; ``package_rewrite`` seals the copy again
(new hashes and sizes for the files it changed) unless told not to.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from pathlib import Path


def package_rewrite(
    good: Path, out: Path, change: Callable[[str, bytes], bytes | None], *, reseal: bool = True
) -> Path:
    """A copy of the package with each member's bytes passed through ``change``
    (``None`` drops the member); resealed unless ``reseal`` is False."""
    with zipfile.ZipFile(good) as source:
        original = {name: source.read(name) for name in source.namelist()}
    members = {}
    for name, data in original.items():
        changed = change(name, data)
        if changed is not None:
            members[name] = changed
    if reseal and "datapackage.json" in members:
        descriptor = json.loads(members["datapackage.json"])
        for resource in descriptor.get("resources", []):
            path = resource.get("path") if isinstance(resource, dict) else None
            if path in members and members[path] != original.get(path):
                resource["bytes"] = len(members[path])
                resource["hash"] = f"sha256:{hashlib.sha256(members[path]).hexdigest()}"
        members["datapackage.json"] = json.dumps(descriptor).encode()
    with zipfile.ZipFile(out, "w") as target:
        for name, data in members.items():
            target.writestr(name, data)
    return out
