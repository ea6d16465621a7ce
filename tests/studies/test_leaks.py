"""The leak check: names and unmasked cues in masked scenes, on built scenes and Friends.

What holds a scene back depends on the benchmark: in ToM-in-AMC any name outside
dialogue (or an unmasked cue); in TVShowGuess only an unmasked cue, since its task
shows the transcript's background and stage directions.
"""

from __future__ import annotations

import pytest

from benchmarks.models import Character, Scene, SpeakerInstance, Work
from benchmarks.services import character_aliases_set
from studies.errors import StudyError
from studies.models import StudyItem
from studies.scene.leaks import (
    HEADING_LINE,
    excerpt,
    flagged_scenes_hold,
    highlight,
    is_blocking,
    leaks_check,
    scan_scene,
    scene_hold,
)
from studies.services import study_create, study_go_live, study_pause

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]


def _chars(*names, aliases=None):
    aliases = aliases or {}
    return [Character(name=n, aliases=aliases.get(n, [])) for n in names]


def _where(findings):
    return [(f["line"], f["kind"], f["where"], f["match"]) for f in findings]


def test_scan_finds_names_in_heading_narration_directions_speech_and_cues():
    lines = [
        {"type": "scene", "title": "NULL", "text": "Carson walks in; MIRANDA looks up."},
        {"type": "dialog", "title": "P0", "text": "(to Miranda) Hi. Where's Walther?"},
        {"type": "dialog", "title": "Dave", "text": "Over here."},
        {"type": "dialog", "title": "P1", "text": "Carsonville is far. Mirandas? no."},
    ]
    findings = scan_scene(
        heading="INT. OFFICE - Dave at his desk",
        lines=lines,
        characters=_chars("carson", "miranda", "dave", "walther"),
    )
    assert _where(findings) == [
        (HEADING_LINE, "name", "heading", "Dave"),
        (0, "name", "narration", "Carson"),
        (0, "name", "narration", "MIRANDA"),
        (1, "name", "direction", "Miranda"),
        (1, "name", "speech", "Walther"),
        (2, "cue", "cue", "Dave"),
    ]  # nothing in line 3: whole words only
    first = findings[1]
    assert first["text"][first["start"] : first["end"]] == "Carson"
    assert first["character"] == "carson"


def test_aliases_and_parts_of_multi_word_names_are_aliases():
    lines = [
        {"type": "dialog", "title": "P0", "text": "Bond. James Bond."},
        {"type": "scene", "title": "NULL", "text": "M glares at 007 and Moneypenny."},
        {"type": "dialog", "title": "P1", "text": "(Rach waves) Rachel?"},
    ]
    chars = _chars(
        "James Bond",
        "Miss Moneypenny",
        "rachel",
        aliases={"James Bond": ["007"], "rachel": ["Rach"]},
    )
    findings = scan_scene(heading="", lines=lines, characters=chars)
    assert _where(findings) == [
        (0, "alias", "speech", "Bond"),
        (0, "name", "speech", "James Bond"),
        (1, "alias", "narration", "007"),
        (1, "alias", "narration", "Moneypenny"),  # last word; the title "Miss" is skipped
        (2, "alias", "direction", "Rach"),
        (2, "name", "speech", "Rachel"),
    ]
    assert {f["character"] for f in findings if f["match"] in ("Bond", "007")} == {"James Bond"}


def test_highlight_cuts_text_around_matches():
    text = "Ross hugs Rachel."
    findings = [
        {"start": 10, "end": 16, "where": "speech"},
        {"start": 0, "end": 4, "where": "narration"},
        {"start": None, "end": None, "where": "cue"},
    ]
    assert highlight(text, findings) == [
        ("Ross", "narration"),
        (" hugs ", ""),
        ("Rachel", "speech"),
        (".", ""),
    ]


def _work_with_scenes():
    """A made-up movie: one clean scene, one whose action line names a speaker."""
    work = Work.objects.create(benchmark="tom-in-amc", key="heist", title="Heist", kind="movie")
    chars = {
        n: Character.objects.create(work=work, name=n, is_main=True, position=i)
        for i, n in enumerate(["vincent", "lola", "marcus"])
    }
    scenes = {}
    for i, (key, lines) in enumerate(
        [
            ("clean", [{"type": "dialog", "title": "P0", "text": "We go at dawn."}]),
            (
                "leaky",
                [
                    {
                        "type": "scene",
                        "title": "NULL",
                        "text": "Lola counts the money while Vinnie watches.",
                    },
                    {"type": "dialog", "title": "P0", "text": "Not enough, Vinnie."},
                ],
            ),
        ]
    ):
        scene = Scene.objects.create(
            work=work, source_id=key, position=i, part="testing", lines=lines
        )
        SpeakerInstance.objects.create(
            scene=scene,
            code="P0",
            gold_character=chars["lola"],
            candidates=["vincent", "lola", "marcus"],
        )
        scenes[key] = scene
    return work, chars, scenes


def test_check_holds_back_leaks_keeps_a_release_and_rechecks_after_alias_edits(researcher):
    work, chars, scenes = _work_with_scenes()
    study = study_create(name="s", benchmark="tom-in-amc", works=[work], created_by=researcher)
    report = leaks_check(study=study)
    assert (report.scenes, report.flagged, report.held_back) == (2, 1, 1)
    leaky = StudyItem.objects.get(study=study, scene=scenes["leaky"])
    clean = StudyItem.objects.get(study=study, scene=scenes["clean"])
    assert leaky.held_back and not clean.held_back and clean.leaks == []
    assert leaky.leaks[0] | {"text": ""} == {
        "line": 0,
        "kind": "name",
        "match": "Lola",
        "character": "lola",
        "where": "narration",
        "start": 0,
        "end": 4,
        "text": "",
        "blocking": True,  # ToM-in-AMC masks narration
    }

    scene_hold(study_item=leaky, held_back=False)  # the researcher's explicit release
    assert leaks_check(study=study).held_back == 0  # same findings: the release stands

    # A nickname added to the alias table is a new finding, held back again...
    character_aliases_set(character=chars["vincent"], aliases=["Vinnie", " ", "vinnie"])
    assert Character.objects.get(pk=chars["vincent"].pk).aliases == ["Vinnie"]
    report = leaks_check(study=study)
    leaky.refresh_from_db()
    assert leaky.held_back and report.held_back == 1
    assert [(f["match"], f["where"], f["blocking"]) for f in leaky.leaks] == [
        ("Lola", "narration", True),
        ("Vinnie", "narration", True),
        ("Vinnie", "speech", False),  # spoken: part of the task
    ]

    # ...and a scene whose leaks are fixed at the source is released by the next check.
    scenes["leaky"].lines[0]["text"] = "P0 counts the money while P1 watches."
    scenes["leaky"].save()
    leaks_check(study=study)
    leaky.refresh_from_db()
    assert not leaky.held_back and [f["match"] for f in leaky.leaks] == ["Vinnie"]


def test_a_live_study_cannot_change_held_back_scenes(researcher):
    work, _, scenes = _work_with_scenes()
    study = study_create(name="s", benchmark="tom-in-amc", works=[work], created_by=researcher)
    leaks_check(study=study)
    study_go_live(study=study)
    leaky = StudyItem.objects.get(study=study, scene=scenes["leaky"])
    with pytest.raises(StudyError, match="cannot change"):
        scene_hold(study_item=leaky, held_back=False)
    with pytest.raises(StudyError):
        leaks_check(study=study)
    study_pause(study=study)
    scene_hold(study_item=leaky, held_back=False)
    assert not StudyItem.objects.get(pk=leaky.pk).held_back


def test_stored_blocking_flag_wins_and_old_findings_fall_back_to_their_place():
    assert is_blocking({"where": "heading", "blocking": True})
    assert not is_blocking({"where": "heading", "blocking": False})  # as TVShowGuess stores it
    # Findings stored before the flag existed: narration and cues block, speech does not.
    assert is_blocking({"where": "direction"}) and is_blocking({"where": "cue"})
    assert not is_blocking({"where": "speech"})


def test_excerpt_keeps_marks_and_a_little_context():
    before, after = "a" * 100 + " end", "start " + "b" * 100
    middle = "m" * 300
    pieces = [(before, ""), ("Ross", "heading"), (middle, ""), ("Joey", "speech"), (after, "")]
    short = excerpt(pieces, context=20)
    assert [where for _, where in short] == ["", "heading", "", "speech", ""]
    assert short[1] == ("Ross", "heading") and short[3] == ("Joey", "speech")
    assert short[0][0] == "\u2026" + before[-20:] and short[4][0] == after[:20] + "\u2026"
    assert "\u2026" in short[2][0] and len(short[2][0]) < 50
    # Short plain text is left whole.
    assert excerpt([("Hey ", ""), ("Ross", "speech"), (".", "")]) == [
        ("Hey ", ""),
        ("Ross", "speech"),
        (".", ""),
    ]


def test_friends_scenes_name_their_candidates_but_only_a_cue_holds_one_back(friends, researcher):
    """The imported Friends scenes keep names in headings and stage directions; TVShowGuess
    shows that background to its raters, so those names are flagged, not held back."""
    study = study_create(name="f", benchmark="tvshowguess", works=[friends], created_by=researcher)
    report = leaks_check(study=study)
    assert (report.scenes, report.flagged, report.held_back) == (53, 0, 0)
    # Names in the background the task shows: their own group, not "dialogue only".
    assert (report.shown, report.mentions) == (52, 0)
    rows = list(study.study_items.select_related("scene"))
    # Every scene but one names a candidate in its heading or a stage direction...
    outside = {s.scene.source_id for s in rows if any(f["where"] != "speech" for f in s.leaks)}
    assert len(outside) == 52 and "09x05 2557" not in outside
    clean = next(s for s in rows if s.scene.source_id == "09x05 2557")
    assert clean.leaks == []
    # ...and each finding is stored as seen but not blocking, so nothing is held back.
    assert {f["blocking"] for s in rows for f in s.leaks} == {False}
    assert not any(s.held_back for s in rows)
    assert flagged_scenes_hold(study=study, held_back=True) == 0  # "hold all flagged": none
    first = next(s for s in rows if s.scene.source_id == "09x01 2500")
    heading = [f for f in first.leaks if f["line"] == HEADING_LINE]
    assert [(f["match"], f["where"]) for f in heading][:3] == [
        ("Rachel", "heading"),
        ("Joey", "heading"),
        ("Ross", "heading"),
    ]
    # No Friends line has an unmasked speaker: the importer masked every main speaker.
    assert not any(f["kind"] == "cue" for s in rows for f in s.leaks)

    # An unmasked speaker cue still gives the answer away: that scene is held back.
    scene = first.scene
    gold = scene.instances.get(code="P0").gold_character.name
    assert scene.lines[0] == {"type": "dialog", "title": "P0", "text": "Joey."}
    scene.lines[0]["title"] = gold.title()
    scene.save(update_fields=["lines"])
    report = leaks_check(study=study)
    assert (report.flagged, report.held_back, report.shown, report.mentions) == (1, 1, 51, 0)
    first.refresh_from_db()
    assert first.held_back
    blocking = [(f["line"], f["kind"], f["match"]) for f in first.leaks if f["blocking"]]
    assert blocking == [(0, "cue", gold.title())]
    assert len(first.leaks) > 1  # the background names are still listed beside it
    assert flagged_scenes_hold(study=study, held_back=False) == 1

    # Masked again, the cue is gone and the next check releases the scene if held.
    scene_hold(study_item=first, held_back=True)
    scene.lines[0]["title"] = "P0"
    scene.save(update_fields=["lines"])
    assert leaks_check(study=study).held_back == 0


def test_leak_page_counts_add_up_to_the_list_grouped_and_paged(client, researcher, friends):
    """Issue 16: the summary said 0 flagged while 52 scenes were listed."""
    from django.urls import reverse

    from studies.services import study_create

    client.force_login(researcher)
    study = study_create(name="Friends leaks", benchmark="tvshowguess", works=[friends])
    leaks_check(study=study)
    page = client.get(reverse("studies:leaks", args=[study.pk])).content.decode()
    assert 'data-testid="leaks-listed">52<' in page and 'data-testid="leaks-shown">52<' in page
    assert "(1\N{EN DASH}20 of 52)" in page and "Shown by the task (52)" in page
    blocking = client.get(reverse("studies:leaks", args=[study.pk]) + "?kind=blocking")
    assert "No scene names a candidate." in blocking.content.decode()
    last = client.get(reverse("studies:leaks", args=[study.pk]) + "?kind=shown&page=3")
    assert "(41\N{EN DASH}52 of 52)" in last.content.decode()
    detail = client.get(reverse("studies:detail", args=[study.pk])).content.decode()
    assert "<strong>52</strong> of 53 scenes have findings: 0 give a candidate away" in detail


def test_leak_page_shows_each_scene_compactly_with_the_whole_scene_folded(
    client, researcher, friends
):
    """Issue 16: a page of 20 scenes with every flagged line in full was 10,444 px long.
    Each scene shows at most three flagged lines, as snippets; the scene is in a fold."""
    import re

    from django.urls import reverse

    from studies.services import study_create
    from studies.views import LEAK_SNIPPETS

    client.force_login(researcher)
    study = study_create(name="Friends leaks", benchmark="tvshowguess", works=[friends])
    leaks_check(study=study)
    page = client.get(reverse("studies:leaks", args=[study.pk])).content.decode()
    articles = page.split('data-testid="leak-scene"')[1:]
    assert len(articles) == 20
    flagged_lines = 0
    for article in articles:
        snippets = article.count('data-testid="leak-snippet"')
        assert 1 <= snippets <= LEAK_SNIPPETS
        # Everything else of the scene is inside its closed fold.
        assert article.count('<details class="leak-full">') == 1
        assert '<details class="leak-full" open' not in article
        flagged_lines += int(re.search(r"\((\d+) of \d+ lines name a candidate\)", article)[1])
    assert flagged_lines > 20 * LEAK_SNIPPETS  # Friends scenes flag many lines each
    first = articles[0]
    # The names tag sums up the places: Rachel is named in the heading and elsewhere.
    assert (
        "Rachel → rachel: heading \N{MULTIPLICATION SIGN}2, narration \N{MULTIPLICATION SIGN}3"
        in first
    )
    # The fold holds the whole scene: its last line, flagged or not, is there.
    last_line = StudyItem.objects.get(study=study, scene__source_id="09x01 2500").scene.lines[-1]
    assert last_line["text"][:30].replace("'", "&#x27;") in first
    # The snippet of the long heading is cut after its last mark and a little context;
    # the fold has it whole.
    shown, fold = first.split('<details class="leak-full">')
    assert "sees that\u2026</span>" in shown and "sees that\u2026" not in fold
