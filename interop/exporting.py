"""An export as the page, the API and ``manage.py export_harness_task`` ask for it.

All three name the same parameters (``source``, ``work``, ``works``, ``split``,
``study``, ``harness``, ``language``, categories, ``limit``, ``method``), refuse the
ones that do not apply to the chosen source (rather than export more than was asked
for), and report an :class:`~.export.ExportError` at the parameter the person typed:
the item set is ``work`` here, where the item bank's own message says ``works``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .export import (
    DYNTOM,
    INSPECT_PLAIN,
    ITEM_SET,
    STUDY,
    ExportBundle,
    ExportError,
    ExportRequest,
    HarnessSample,
    build_export,
)

# The parameters each source reads; any other one given is refused.
APPLIES = {
    ITEM_SET: {"work", "language", "categories", "limit"},
    DYNTOM: {"works", "split", "limit"},
    STUDY: {"study", "language"},
}
WHERE = {
    "work": "an item set",
    "works": "DynToM",
    "split": "DynToM",
    "study": "a study",
    "language": "an item set or a study",
    "categories": "an item set",
    "limit": "an item set or DynToM",
}
PREVIEW_SAMPLES = 3
# A long input shows its start and its end: a DynToM sample's question comes after the
# stage's characters and story.
PREVIEW_START_CHARS = 300
PREVIEW_END_CHARS = 200


def stage_keys(text: str) -> tuple[str, ...]:
    """DynToM stage keys as typed: separated by commas, spaces or line breaks."""
    return tuple(dict.fromkeys(k for k in re.split(r"[\s,]+", text or "") if k))


def export_build(request: ExportRequest) -> ExportBundle:
    """The export, after refusing what does not apply to its source: an item set's
    categories asked of a DynToM subset would otherwise be dropped without a word."""
    given = {
        "work": request.work,
        "works": request.works,
        "split": request.split,
        "study": request.study_id,
        "language": request.language,
        "categories": request.categories,
        "limit": request.limit,
    }
    applies = APPLIES.get(request.source, set())
    for name, value in given.items():
        if value not in (None, "", (), {}) and name not in applies:
            raise ExportError(name, f"applies to {WHERE[name]} only")
    if request.method != "vanilla" and request.harness != INSPECT_PLAIN:
        raise ExportError("method", "applies to the Inspect task with our prompt only")
    if request.source == STUDY and request.study_id is None:
        raise ExportError("study", "choose the study to export")
    return build_export(request)


def error_param(exc: ExportError, *, source: str) -> tuple[str, str]:
    """The parameter at fault and the message, as the person typed them.

    The item bank names an item set ``works`` and may put the value after the field
    (``language 'fr': … has en``); the message keeps the value.
    """
    name, _, value = exc.field.partition(" ")
    message = f"{value}: {exc.message}" if value else exc.message
    if name == "works" and source == ITEM_SET:
        name = "work"
    return name, message


@dataclass(frozen=True)
class SamplePreview:
    id: str
    input: str
    # The input's last characters where the middle is left out ("" where it is all shown).
    input_end: str
    choices: list[str]
    target: str
    # Inspect with our prompt: the template it was written with ("generic-cot-en v1").
    template: str


def sample_previews(bundle: ExportBundle) -> list[SamplePreview]:
    """The first few samples as a person checks them before downloading: the id, the
    input's start and end (the user's message of a chat prompt), the choices, the target."""
    return [_preview(sample) for sample in bundle.samples[:PREVIEW_SAMPLES]]


def _preview(sample: HarnessSample) -> SamplePreview:
    long = PREVIEW_START_CHARS + PREVIEW_END_CHARS
    if isinstance(sample.input, str):
        text = sample.input
    else:
        users = [m["content"] for m in sample.input if m.get("role") == "user"]
        text = users[-1] if users else "\n\n".join(m["content"] for m in sample.input)
    return SamplePreview(
        id=sample.id,
        input=text if len(text) <= long else _cut(text[:PREVIEW_START_CHARS], end=True),
        input_end="" if len(text) <= long else _cut(text[-PREVIEW_END_CHARS:], end=False),
        choices=list(sample.choices or []),
        target=", ".join(sample.target),
        template=str(sample.metadata.get("template") or ""),
    )


def _cut(text: str, *, end: bool) -> str:
    """``text`` without the word the cut went through, at its end or at its start."""
    if end:
        head, _, _ = text.rpartition(" ")
        return head or text
    _, _, tail = text.partition(" ")
    return tail or text
