"""The leak check: does a masked test scene give the answer away?

Before a study goes live every study scene is scanned for the names of its candidate
characters: the full name (kind ``name``), and the aliases of the work's alias table
plus the first and last word of multi-word names (kind ``alias``), whole words,
case-insensitive; and for unmasked speaker cues, a dialog line whose speaker is a
candidate's name instead of a P-code (kind ``cue``).

Where a name appears matters. In narration (the scene heading, action lines, and
stage directions in parentheses or brackets inside a dialog line) a name says who is
present and who does what: ToM-in-AMC masks those, so a hit there is a leak. Names
*spoken* in dialogue ("Hey Joey") are part of the task in both ToM-in-AMC and
TVShowGuess (they tell who is addressed, not who speaks), so they are listed for the
researcher but do not hold a scene back.

Policy: a scene with a cue or a narration hit is held back (never assigned) by
default (for TVShowGuess only a cue: see ``BLOCKING_WHERE_BY_BENCHMARK``); the
researcher may release it explicitly. Re-running the check keeps that
decision while the scene's findings are unchanged, holds the scene back again when
new findings appear, and releases it when its findings are gone (an alias fixed).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import transaction

from benchmarks.models import Character, SpeakerInstance

from ..errors import StudyError
from ..models import Study, StudyItem
from .perturbation import name_parts

HEADING_LINE = -1  # the scene heading is reported as line -1
BLOCKING_WHERE = ("cue", "heading", "narration", "direction")
# Stage directions inside a dialog line: "(To Rachel)", "[Ross enters]".
_DIRECTION = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_MASK_CODE = re.compile(r"^P\d+$", re.IGNORECASE)
EDITABLE_STATUSES = (Study.Status.DRAFT, Study.Status.PAUSED)


@dataclass(frozen=True)
class Term:
    text: str
    kind: str  # name | alias
    character: str


def candidate_terms(characters: list[Character]) -> list[Term]:
    """Everything a scene could name its candidates by, longest first."""
    terms: dict[str, Term] = {}
    for c in characters:
        terms.setdefault(c.name.casefold(), Term(c.name, "name", c.name))
    for c in characters:
        for alias in [*c.aliases, *name_parts(c.name)]:
            alias = alias.strip()
            if len(alias) > 1:
                terms.setdefault(alias.casefold(), Term(alias, "alias", c.name))
    return sorted(terms.values(), key=lambda t: len(t.text), reverse=True)


@lru_cache(maxsize=512)
def _pattern(texts: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w)(?:{'|'.join(re.escape(t) for t in texts)})(?!\w)", re.IGNORECASE)


def _find(text: str, terms: list[Term], line: int, where: str) -> list[dict[str, Any]]:
    if not text or not terms:
        return []
    by_text = {t.text.casefold(): t for t in terms}
    pattern = _pattern(tuple(t.text for t in terms))
    if where == "speech":
        # Only the spoken part: blank out directions, keeping offsets into ``text``.
        spoken = _DIRECTION.sub(lambda m: " " * len(m.group(0)), text)
        spans = [(m, "speech") for m in pattern.finditer(spoken)]
        for d in _DIRECTION.finditer(text):
            spans += [(m, "direction") for m in pattern.finditer(text, d.start(), d.end())]
    else:
        spans = [(m, where) for m in pattern.finditer(text)]
    findings = []
    for m, place in sorted(spans, key=lambda s: s[0].start()):
        term = by_text[m.group(0).casefold()]
        findings.append(
            {
                "line": line,
                "kind": term.kind,
                "match": m.group(0),
                "character": term.character,
                "where": place,
                "start": m.start(),
                "end": m.end(),
                "text": text,
            }
        )
    return findings


def scan_scene(
    *, heading: str, lines: list[dict[str, Any]], characters: list[Character]
) -> list[dict[str, Any]]:
    """Findings for one masked scene whose candidates are ``characters`` (pure)."""
    terms = candidate_terms(characters)
    names = {t.text.casefold(): t for t in terms}
    findings = _find(heading, terms, HEADING_LINE, "heading")
    for i, line in enumerate(lines):
        title = (line.get("title") or "").strip()
        text = line.get("text") or ""
        if line.get("type") == "dialog":
            term = names.get(title.casefold())
            if term is not None and not _MASK_CODE.match(title):
                findings.append(
                    {
                        "line": i,
                        "kind": "cue",
                        "match": title,
                        "character": term.character,
                        "where": "cue",
                        "start": None,
                        "end": None,
                        "text": text,
                    }
                )
            findings += _find(text, terms, i, "speech")
        else:
            findings += _find(text, terms, i, "narration")
    return findings


# TVShowGuess shows the transcript's background and stage directions as part of its
# task (its authors' annotation counts "inside_scene(background)" as evidence in a
# third of the answers), so there a name in narration is flagged for the researcher
# but only an unmasked speaker cue holds a scene back.
BLOCKING_WHERE_BY_BENCHMARK = {"tvshowguess": ("cue",)}


def is_blocking(finding: dict[str, Any]) -> bool:
    """Whether a finding holds its scene back; decided by the benchmark at scan time."""
    return finding.get("blocking", finding.get("where") in BLOCKING_WHERE)


def _signature(findings: list[dict[str, Any]]) -> set[tuple]:
    return {
        (f["line"], f["where"], f.get("start"), f["match"].casefold())
        for f in findings
        if is_blocking(f)
    }


@dataclass(frozen=True)
class LeakReport:
    scenes: int
    flagged: int  # scenes with a blocking finding
    mentions: int  # scenes whose only findings are names spoken in dialogue
    held_back: int
    # Scenes naming a candidate outside dialogue where the benchmark's task shows that
    # text anyway (TVShowGuess backgrounds): listed and flagged, never held back.
    shown: int = 0

    def summary(self) -> str:
        """One line whose counts add up to the scenes the leak page lists."""
        return (
            f"{self.flagged} of {self.scenes} scenes give a candidate away (held back until "
            f"released), {self.shown} name one where this benchmark's task shows it anyway, "
            f"{self.mentions} only in dialogue; {self.held_back} held back"
        )


@transaction.atomic
def leaks_check(*, study: Study) -> LeakReport:
    """Scan every scene of the study, store its findings, hold back new leaks."""
    if study.status not in EDITABLE_STATUSES:
        raise StudyError(f"a {study.get_status_display()} study's scenes cannot change")
    rows = list(
        StudyItem.objects.select_for_update(of=("self",))
        .filter(study=study)
        .select_related("scene", "study_work")
        .order_by("pk")
    )
    candidates: dict[int, set[str]] = defaultdict(set)
    for scene_id, names in SpeakerInstance.objects.filter(
        scene_id__in=[r.scene_id for r in rows]
    ).values_list("scene_id", "candidates"):
        candidates[scene_id].update(n.casefold() for n in names)
    characters: dict[int, dict[str, Character]] = defaultdict(dict)
    for c in Character.objects.filter(work_id__in={r.study_work.work_id for r in rows}):
        characters[c.work_id][c.name.casefold()] = c
    blocking_where = BLOCKING_WHERE_BY_BENCHMARK.get(study.benchmark, BLOCKING_WHERE)
    flagged = mentions = shown = 0
    for row in rows:
        work_chars = characters[row.study_work.work_id]
        # A candidate the item bank has no row for is still scanned by its name.
        chosen = [
            work_chars.get(n) or Character(name=n, work_id=row.study_work.work_id)
            for n in sorted(candidates[row.scene_id])
        ]
        findings = scan_scene(heading=row.scene.heading, lines=row.scene.lines, characters=chosen)
        for finding in findings:
            finding["blocking"] = finding.get("where") in blocking_where
        new, old = _signature(findings), _signature(row.leaks or [])
        if new and new != old:
            row.held_back = True  # a new leak: held back until the researcher looks
        elif not new and old:
            row.held_back = False  # its leaks are gone
        row.leaks = findings
        flagged += bool(new)
        outside = any(f.get("where") != "speech" for f in findings)
        shown += bool(findings) and not new and outside
        mentions += bool(findings) and not new and not outside
    StudyItem.objects.bulk_update(rows, ["leaks", "held_back"], batch_size=200)
    return LeakReport(
        scenes=len(rows),
        flagged=flagged,
        mentions=mentions,
        held_back=sum(r.held_back for r in rows),
        shown=shown,
    )


@transaction.atomic
def scene_hold(*, study_item: StudyItem, held_back: bool) -> StudyItem:
    """Hold a scene back from assignment, or release it (the researcher's decision)."""
    study = Study.objects.select_for_update().get(pk=study_item.study_id)
    if study.status not in EDITABLE_STATUSES:
        raise StudyError(f"a {study.get_status_display()} study's scenes cannot change")
    StudyItem.objects.filter(pk=study_item.pk).update(held_back=held_back)
    study_item.held_back = held_back
    return study_item


@transaction.atomic
def flagged_scenes_hold(*, study: Study, held_back: bool) -> int:
    """Hold back (or release) every scene with a blocking finding; returns how many changed."""
    study = Study.objects.select_for_update().get(pk=study.pk)
    if study.status not in EDITABLE_STATUSES:
        raise StudyError(f"a {study.get_status_display()} study's scenes cannot change")
    ids = [
        pk
        for pk, leaks in StudyItem.objects.filter(study=study)
        .exclude(held_back=held_back)
        .values_list("pk", "leaks")
        if any(is_blocking(f) for f in leaks or [])
    ]
    return StudyItem.objects.filter(pk__in=ids).update(held_back=held_back)


def highlight(text: str, findings: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``text`` cut into (piece, where) so a template can wrap matches in <mark>.

    ``where`` is "" for plain text, else the finding's place (heading, speech, …).
    """
    spans = sorted(
        (f["start"], f["end"], f.get("where", "")) for f in findings if f.get("start") is not None
    )
    pieces: list[tuple[str, str]] = []
    at = 0
    for start, end, where in spans:
        if start < at:
            continue
        if start > at:
            pieces.append((text[at:start], ""))
        pieces.append((text[start:end], where))
        at = end
    if at < len(text):
        pieces.append((text[at:], ""))
    return pieces


def excerpt(pieces: list[tuple[str, str]], *, context: int = 60) -> list[tuple[str, str]]:
    """``highlight``'s pieces with the plain text shortened to ``context`` characters
    around the marks ("…" where text was cut): the leak page shows a flagged line as a
    snippet, and the whole line only inside its folded full scene."""
    ellipsis = "\u2026"
    out: list[tuple[str, str]] = []
    last = len(pieces) - 1
    for i, (text, where) in enumerate(pieces):
        if where or len(text) <= context:
            out.append((text, where))
        elif i == 0:
            out.append((ellipsis + text[-context:].lstrip(), ""))
        elif i == last:
            out.append((text[:context].rstrip() + ellipsis, ""))
        elif len(text) > 2 * context:
            half = context
            out.append((text[:half].rstrip() + f" {ellipsis} " + text[-half:].lstrip(), ""))
        else:
            out.append((text, ""))
    return out
