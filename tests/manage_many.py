"""Run several ``manage.py`` commands in one process, as the command line runs each.

``python tests/manage_many.py '[["migrate", "--no-input"], ["import_study", "a.zip"]]'``
prints one JSON object per command: its exit status and what it wrote to stdout and
stderr. A test that needs commands against another database starts one Django instead of
one per command (about 2 s of CPU each on CI's machines).
"""

import contextlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    from django.core.management import ManagementUtility

    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                ManagementUtility(["manage.py", *argv]).execute()
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
        results.append({"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
