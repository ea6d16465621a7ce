"""Screening against absolute floors: whether a participant read faster than anyone can.

The cohort rule (``ledger``: a median time under a share of the cohort's) misses a cohort
that is fast as a whole. The reading floor does not compare people: each page a
participant went through, a work's history ("I have read it") or an item answered, has
the words the time estimate counts (``words.study_item_words`` and
``study_history_words``), and reading them at ``Study.floor_wpm`` words a minute takes a
least time. A page done in less is under the floor.

Times are the server's, never the browser's, so a script that lies cannot pass: an
item's is ``Assignment.total_ms`` (first shown to submitted), a history's is from the
first time the server served its reader page (``HistoryView``) to the confirmation; a
history confirmed without its page ever being served took no time at all.

A participant is under the floor when more than ``Study.floor_max_share`` of their
pages are, or when their whole part (every page's words over every page's time) is.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Min, Q

from ..models import Assignment, Participant, Study, StudyItem, WorkSession
from .words import study_history_words, study_item_words

FLOOR_REASON = "reading floor"


@dataclass
class ReadingPace:
    """One participant's pages, by the server's clock: how many, how many under the
    floor, and what they add up to (history scenes read, items answered, words, time)."""

    pages: int = 0
    under: int = 0
    history_scenes: int = 0
    items: int = 0
    words: int = 0
    ms: int = 0

    def add(self, *, words: int, ms: int, wpm: int) -> None:
        self.pages += 1
        self.words += words
        self.ms += ms
        self.under += ms < floor_ms(words, wpm)


def floor_ms(words: int, wpm: int) -> float:
    """The least time ``words`` take at ``wpm`` words a minute, in milliseconds."""
    return words * 60_000 / wpm


def reading_paces(study: Study, participants: list[Participant]) -> dict[int, ReadingPace]:
    """participant id -> their pace, for those of ``participants`` with a page done.

    Two queries (history sessions, submitted test items) and the word counts, which
    are cached. Only test items count, as for the cohort's times: a practice item is a
    warm-up and an attention check is answered without reading. An item without a
    server time (published annotations imported as a study) is left out.
    """

    wpm = study.floor_wpm
    ids = [p.pk for p in participants]
    paces: dict[int, ReadingPace] = defaultdict(ReadingPace)
    history = study_history_words(study=study)
    if history:
        sessions = (
            WorkSession.objects.filter(
                participant_id__in=ids,
                study_work_id__in=history,
                history_confirmed_at__isnull=False,
            )
            .annotate(first_read=Min("views__opened_at", filter=Q(views__where="reader")))
            .values_list("participant_id", "study_work_id", "history_confirmed_at", "first_read")
        )
        for pid, study_work_id, confirmed, first_read in sessions:
            spent = confirmed - first_read if first_read is not None else timedelta(0)
            scenes, words = history[study_work_id]
            paces[pid].history_scenes += scenes
            paces[pid].add(words=words, ms=max(0, int(spent.total_seconds() * 1000)), wpm=wpm)
    words_of = study_item_words(study=study)
    items = Assignment.objects.filter(
        participant_id__in=ids,
        status=Assignment.Status.SUBMITTED,
        study_item__role=StudyItem.Role.TEST,
        total_ms__isnull=False,
    ).values_list("participant_id", "study_item_id", "total_ms")
    for pid, item_id, ms in items:
        paces[pid].items += 1
        paces[pid].add(words=words_of.get(item_id, 0), ms=ms, wpm=wpm)
    return dict(paces)


def floor_reason(pace: ReadingPace, *, wpm: int, max_share: float, noun: str) -> str:
    """Why ``pace`` is under the floor ("" when it is not), for the ledger and exports:
    "reading floor: read 63 history scenes (12,829 words) in 41 s: under the 600 wpm
    floor (1,283 s); 9 of 9 pages under the floor (allowed 50%)"."""
    if not pace.pages or not pace.words:
        return ""
    whole_under = pace.ms < floor_ms(pace.words, wpm)
    share_over = pace.under / pace.pages > max_share
    if not (whole_under or share_over):
        return ""
    parts = []
    if pace.history_scenes:
        parts.append(f"{pace.history_scenes} history scene{'s' * (pace.history_scenes != 1)}")
    if pace.items:
        parts.append(f"{pace.items} {noun}{'s' * (pace.items != 1)}")
    read = " and ".join(parts)
    seconds, least = pace.ms / 1000, math.ceil(floor_ms(pace.words, wpm) / 1000)
    if whole_under:
        whole = f": under the {wpm} wpm floor ({least:,} s)"
    else:
        whole = f" (the {wpm} wpm floor: {least:,} s)"
    return (
        f"{FLOOR_REASON}: read {read} ({pace.words:,} words) in {seconds:,.0f} s{whole}; "
        f"{pace.under} of {pace.pages} page{'s' * (pace.pages != 1)} under the floor "
        f"(allowed {max_share:.0%})"
    )


def study_floor_reasons(study: Study, participants: list[Participant]) -> dict[int, str]:
    """participant id -> why the reading floor excludes them (none when it is off)."""
    if study.floor_wpm <= 0 or study.imported:
        return {}
    noun = "scene" if study.benchmark in ("tom-in-amc", "tvshowguess") else "item"
    if study.benchmark == "dyntom":
        noun = "stage"
    reasons = {}
    for pid, pace in reading_paces(study, participants).items():
        reason = floor_reason(pace, wpm=study.floor_wpm, max_share=study.floor_max_share, noun=noun)
        if reason:
            reasons[pid] = reason
    return reasons
