"""Speaker guessing end to end: a screenplay movie and the Friends scenes, loopback server.

The scripted server answers each guessing prompt with the gold names of the scene the
prompt tests (found by its text, computed before the run: the server thread cannot
read the test's uncommitted rows) and each ToMPro stage-1 prompt with text carrying a
numbered marker, so a test can tell which record a guessing prompt shows.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks.models import Character, Scene, Work
from modeling.models import CachedResponse, MentalStateRecord, Prediction, Run, RunCall
from modeling.pipelines import get_pipeline
from modeling.pipelines.speaker_guess import parse_scene_reply, read_name, score_answer
from modeling.runs.executor import run_execute
from modeling.runs.selectors import run_prediction_summary
from modeling.runs.services import run_create, run_plan, run_resume
from tests.module_rows import build_friends

pytestmark = pytest.mark.django_db

GUESS_MARK = "Who are the masked characters"
MARK_RE = re.compile(r"MARK(\d+)")


@pytest.fixture
def big_fish(db, shared_data: Path) -> Work:
    call_command(
        "import_benchmark",
        "screenplay",
        str(shared_data / "screenplays" / "big_fish.fountain"),
        "--no-progress",
        verbosity=0,
    )
    return Work.objects.get(benchmark="tom-in-amc")


@pytest.fixture
def friends(db, shared_data: Path) -> Work:
    build_friends(shared_data)
    return Work.objects.get(benchmark="tvshowguess")


# --- the tolerant reader -----------------------------------------------------------------

CANDIDATES = ["edward", "will", "sandra", "jenny", "josephine"]
ALIASES = {"edward": ["EDWARD", "ADULT EDWARD", "YOUNG EDWARD"], "will": ["YOUNG WILL"]}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("edward", "edward"),
        ("Edward", "edward"),
        ("  SANDRA ", "sandra"),
        ("ADULT EDWARD", "edward"),  # an alias
        ("Young Will", "will"),  # an alias, any case
        ("Jenny, because she waits at the house", "jenny"),  # extra words
        ("I think it is Josephine.", "josephine"),
        ("**Sandra**", "sandra"),
        ("(c) Sandra", "sandra"),
        ("(b)", "will"),  # an option letter alone
        ("d", "jenny"),
        ("Sandra (not Jenny)", "sandra"),  # the candidate named first
        ("Karl", None),  # outside the candidates
        ("the giant", None),
        ("(z)", None),
        ("", None),
    ],
)
def test_read_name_is_tolerant(answer, expected):
    assert read_name(answer, CANDIDATES, ALIASES) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("P0: Edward\nP1: Will", ("edward/ok", "will/ok")),
        ("P0-EDWARD\nP1-WILL", ("edward/ok", "will/ok")),  # the paper's format
        ("p0 = edward, p1 = will", ("edward/ok", "will/ok")),  # one line, lower case
        ("**P0**: Adult Edward\n**P1**: Young Will", ("edward/ok", "will/ok")),
        ("P0 is Edward, who tells stories. P1 is Will.", ("edward/ok", "will/ok")),
        # Reasoning first, the final lines last: the last readable answer counts.
        ("P0: the storyteller, so\nP1: his son\nP0: Edward\nP1: Will", ("edward/ok", "will/ok")),
        ("P0: Karl\nP1: Will", ("Karl/unparseable", "will/ok")),  # outside the candidates
        ("P0: Edward", ("edward/ok", "/missing")),
        ("Edward and Will", ("/unparseable", "/unparseable")),
        ("I'm sorry, I cannot help with that.", ("/refused", "/refused")),
    ],
)
def test_scene_reply_statuses(reply, expected):
    items = [
        {
            "id": n,
            "code": f"P{n}",
            "candidates": CANDIDATES,
            "gold": ["edward", "will"][n],
            "shown": {c: c.title() for c in CANDIDATES},
            "aliases": ALIASES,
        }
        for n in range(2)
    ]
    parsed = parse_scene_reply(reply, items)
    assert tuple(f"{p.parsed_answer}/{p.parse_status}" for p in parsed) == expected
    assert [p.correct for p in parsed] == [s.split("/")[1] == "ok" for s in expected]


def test_score_answer_reads_perturbed_names_back_to_the_candidate():
    shown = {"edward": "David", "will": "James"}
    right = score_answer(answer="david", candidates=["edward", "will"], gold="edward", shown=shown)
    assert (right.parsed_answer, right.parse_status, right.correct) == ("edward", "ok", True)
    assert right.details == {"shown_as": "David"}
    # The real name is not an option in a perturbed run.
    real = score_answer(answer="Edward", candidates=["edward", "will"], gold="edward", shown=shown)
    assert (real.parse_status, real.correct) == ("unparseable", False)


# --- helpers ------------------------------------------------------------------------------


def gold_answers(benchmark: str, method: str, options: dict, selection: dict) -> dict[str, str]:
    """Rendered test-scene text -> the gold reply, as the run will show the scene."""
    pipeline = get_pipeline(benchmark)
    options = pipeline.clean_options(method=method, options=options)
    answers = {}
    for work in pipeline.works(selection):
        view = pipeline.view(work, method, options)
        for scene in pipeline.test_scenes(list(work.scenes.all()), selection):
            answers[view.scene_text(scene.lines)] = "\n".join(
                f"{i.code}: {view.name(i.gold_character.name)}" for i in scene.instances.all()
            )
    return answers


def responder_for(answers: dict[str, str]):
    """Gold for guessing prompts, numbered markers for stage-1 and recall prompts."""
    counter = itertools.count()

    def between(prompt: str, start: str, end: str) -> list[str]:
        text = prompt.split(start, 1)[1].split(end, 1)[0]
        return [name.strip() for name in text.split(",")]

    def responder(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if GUESS_MARK in prompt and "Answer with one line" in prompt:
            # The scene tested comes last (examples come first).
            return answers[max(answers, key=prompt.rfind)]
        n = next(counter)
        if "current descriptions" in prompt:
            names = between(prompt, "in which ", " appear:")
            return "\n".join(f"{name}: steady and kind MARK{n}" for name in names)
        if "Definitions:" in prompt:
            return f"Emotions: worried MARK{n}\nBeliefs: the fish is real\nDesires: home\n" + (
                "Intentions: to leave"
            )
        if "Read these scenes" in prompt:
            names = between(prompt, "For each of ", ", describe")
            return "\n".join(
                f"{name}\nPersonality: bold MARK{n}\nDesires: travel MARK{n}" for name in names
            )
        return f"A proud storyteller MARK{n}."

    return responder


def execute(backend, llm_server, benchmark, method, *, options=None, selection=None) -> Run:
    options, selection = options or {}, selection or {}
    llm_server.responder = responder_for(gold_answers(benchmark, method, options, selection))
    run = run_create(
        benchmark=benchmark,
        method=method,
        backend=backend,
        selection=selection,
        params={"options": options},
        enqueue=False,
    )
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED, Run.objects.get(pk=run.pk).error
    run.refresh_from_db()
    return run


def prompts(run: Run) -> list[str]:
    """Every stored prompt of a run: the cached request of each of its calls."""
    keys = RunCall.objects.filter(run=run).values_list("cache_key", flat=True)
    requests = CachedResponse.objects.filter(key__in=list(keys)).values_list("request", flat=True)
    texts = ["\n".join(m["content"] for m in r["messages"]) for r in requests]
    assert len(texts) == RunCall.objects.filter(run=run).count()
    return texts


def guess_prompts(run: Run) -> dict[str, str]:
    """Unit key -> guessing prompt (the calls that are not stage-1 or recall calls)."""
    out = {}
    for call in RunCall.objects.filter(run=run).exclude(unit_key__startswith="tompro1:"):
        if call.unit_key.startswith("memory:"):
            continue
        request = CachedResponse.objects.get(key=call.cache_key).request
        out[call.unit_key] = request["messages"][-1]["content"]
    return out


# --- methods end to end -------------------------------------------------------------------


@pytest.mark.parametrize("method", ["zero-shot", "icl", "names-only"])
def test_guessing_methods_over_a_screenplay_movie(openai_backend, llm_server, big_fish, method):
    options = {"shots": 10} if method == "icl" else {}
    run = execute(
        openai_backend,
        llm_server,
        "tom-in-amc",
        method,
        options=options,
        selection={"scene_limit": 6},
    )
    predictions = Prediction.objects.filter(run=run)
    tested = [s for s in big_fish.scenes.order_by("position") if s.instances.exists()][:6]
    assert run.total_calls == run.done_calls == 6
    assert predictions.count() == sum(s.instances.count() for s in tested)
    assert set(predictions.values_list("parse_status", flat=True)) == {"ok"}
    assert all(predictions.values_list("correct", flat=True))
    # The run page colours accuracy against guessing among each speaker's candidates.
    counts = [
        len(p.speaker_instance.candidates) for p in predictions.select_related("speaker_instance")
    ]
    summary = run_prediction_summary(run=run)
    assert summary.chance == pytest.approx(sum(1 / k for k in counts) / len(counts))
    texts = prompts(run)
    if method == "names-only":
        assert all('"Big Fish"' in t for t in texts)
    else:
        assert not any("big fish" in t.lower() for t in texts)
    if method == "icl":
        # Ten solved history scenes come before each test case.
        assert all(
            t.count("Example ") == 10 and t.index("Example 10") < t.index("Test case")
            for t in texts
        )


@pytest.mark.parametrize("shots", [10, 20])
def test_icl_over_the_friends_scenes_uses_earlier_scenes(
    openai_backend, llm_server, friends, shots
):
    run = execute(openai_backend, llm_server, "tvshowguess", "icl", options={"shots": shots})
    predictions = Prediction.objects.filter(run=run)
    assert predictions.count() == 149 and all(predictions.values_list("correct", flat=True))
    by_key = guess_prompts(run)
    scenes = list(friends.scenes.order_by("position"))
    # No history part: the scenes before the tested one are the examples, at most k.
    first, later = (
        by_key[f"tvshowguess:friends:{scenes[0].source_id}"],
        by_key[f"tvshowguess:friends:{scenes[-1].source_id}"],
    )
    assert "(no earlier scenes)" in first
    assert later.count("Example ") == shots
    assert run.params["options"]["shots"] == shots


def test_tompro_stage_one_records_and_no_look_ahead(openai_backend, llm_server, big_fish):
    run = execute(openai_backend, llm_server, "tom-in-amc", "tompro", selection={"scene_limit": 4})
    records = list(MentalStateRecord.objects.filter(run=run).select_related("scene", "character"))
    assert records and {r.source for r in records} == {"scene"}
    history = big_fish.scenes.filter(part=Scene.Part.TRAINING)
    assert any(r.scene.part == Scene.Part.TESTING for r in records)  # history of testing scenes
    assert {r.character.name for r in records} <= set(
        big_fish.characters.filter(is_main=True).values_list("name", flat=True)
    )
    # Each marker belongs to one record; a guessing prompt may show only markers of
    # records of scenes before the scene it guesses, and shows the latest ones.
    position_of = {}
    for record in records:
        for field in ("personality", "emotions"):
            for mark in MARK_RE.findall(getattr(record, field)):
                position_of[int(mark)] = record.scene.position
    assert position_of
    tested = {s.source_id: s for s in big_fish.scenes.filter(part=Scene.Part.TESTING)}
    prompts_by_key = guess_prompts(run)
    assert len(prompts_by_key) == 4
    for key, prompt in prompts_by_key.items():
        scene = tested[key.rsplit(":", 1)[1]]
        shown = {int(m) for m in MARK_RE.findall(prompt)}
        assert shown, key
        assert max(position_of[m] for m in shown) < scene.position, key
        latest = max(r.scene.position for r in records if r.scene.position < scene.position)
        assert latest in {position_of[m] for m in shown}, key
    # Stage 1 ran once per scene with main characters, at the stage-1 temperature.
    stage1 = RunCall.objects.filter(run=run, unit_key__startswith="tompro1:")
    assert stage1.count() == run.total_calls - 4 and stage1.filter(status="done").count()
    assert {r["temperature"] for r in llm_server.requests if GUESS_MARK not in str(r)} == {1.0}
    assert history.count() > 0

    # Resuming repeats nothing: stage 1 and stage 2 come from the run's calls.
    before = llm_server.request_count
    run.status = Run.Status.FAILED
    run.save(update_fields=["status"])
    run_resume(run_id=run.pk, enqueue=False)
    assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
    assert llm_server.request_count == before
    assert MentalStateRecord.objects.filter(run=run).count() == len(records)


def test_tompro_stage_one_overlaps_at_16_and_matches_one_at_a_time(
    openai_backend, llm_server, big_fish
):
    """Issue 31: stage 1 sends the calls of a scene together (the personality update
    and each character's instant states; works side by side) inside the run's window,
    so at max_concurrency 16 they overlap at the loopback server, while every record
    and prediction equals a run at max_concurrency 1. Replies depend on the prompt
    only (a marker from its hash), so any difference is the engine's."""
    import hashlib
    import threading
    import time

    answers = gold_answers("tom-in-amc", "tompro", {}, {"scene_limit": 4})
    lock = threading.Lock()
    in_flight = {"now": 0, "peak": 0}

    def responder(body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if GUESS_MARK in prompt and "Answer with one line" in prompt:
            return answers[max(answers, key=prompt.rfind)]
        with lock:
            in_flight["now"] += 1
            in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        time.sleep(0.02)  # long enough for calls sent together to meet at the server
        with lock:
            in_flight["now"] -= 1
        mark = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16)
        if "current descriptions" in prompt:
            names = prompt.split("in which ", 1)[1].split(" appear:", 1)[0].split(",")
            return "\n".join(f"{n.strip()}: steady MARK{mark}" for n in names)
        return f"Emotions: worried MARK{mark}\nBeliefs: the fish is real"

    def tompro_at(concurrency: int) -> tuple[Run, int]:
        openai_backend.max_concurrency = concurrency
        openai_backend.save(update_fields=["max_concurrency"])
        llm_server.responder = responder
        in_flight.update(now=0, peak=0)
        CachedResponse.objects.all().delete()  # each run asks the server itself
        run = run_create(
            benchmark="tom-in-amc",
            method="tompro",
            backend=openai_backend,
            selection={"scene_limit": 4},
            params={"options": {}},
            enqueue=False,
        )
        assert run_execute(run_id=run.pk) == Run.Status.SUCCEEDED
        return run, in_flight["peak"]

    def outcome(run: Run) -> tuple[list, list]:
        records = sorted(
            (r.character.name, r.scene.position, r.personality, r.emotions, r.beliefs)
            for r in MentalStateRecord.objects.filter(run=run).select_related("scene", "character")
        )
        predictions = sorted(
            Prediction.objects.filter(run=run).values_list(
                "speaker_instance_id", "parsed_answer", "correct"
            )
        )
        return records, predictions

    serial, serial_peak = tompro_at(1)
    concurrent, concurrent_peak = tompro_at(16)
    assert serial_peak == 1
    assert concurrent_peak > 1
    records, predictions = outcome(concurrent)
    assert records and predictions
    assert (records, predictions) == outcome(serial)


def test_tompro_without_updates_after_training_shows_history_records_only(
    openai_backend, llm_server, big_fish
):
    run = execute(
        openai_backend,
        llm_server,
        "tom-in-amc",
        "tompro",
        options={"updates_after_training": False},
        selection={"scene_limit": 3},
    )
    records = MentalStateRecord.objects.filter(run=run).select_related("scene")
    assert {r.scene.part for r in records} == {Scene.Part.TRAINING}
    marks = {
        int(m): r.scene.position
        for r in records
        for m in MARK_RE.findall(r.personality + r.emotions)
    }
    last_history = max(r.scene.position for r in records)
    for prompt in guess_prompts(run).values():
        assert {marks[int(m)] for m in MARK_RE.findall(prompt)} <= {
            p for p in marks.values() if p <= last_history
        }


def test_tompro_long_context_and_dimension_subset(openai_backend, llm_server, big_fish):
    run = execute(
        openai_backend,
        llm_server,
        "tom-in-amc",
        "tompro",
        options={"iterative": False, "dimensions": ["personality", "desires"]},
        selection={"scene_limit": 2},
    )
    stage1 = RunCall.objects.filter(run=run, unit_key__startswith="tompro1:")
    assert stage1.count() == 1  # one long-context pass
    records = MentalStateRecord.objects.filter(run=run)
    assert records.count() == 5 and {r.source for r in records} == {"long_context"}
    assert all("MARK" in r.personality and "MARK" in r.desires for r in records)
    for prompt in guess_prompts(run).values():
        assert "Personality: bold" in prompt and "Desires: travel" in prompt
        assert "Emotions:" not in prompt and "Beliefs:" not in prompt


def test_tompro_dimension_subset_skips_unneeded_prompts(openai_backend, llm_server, big_fish):
    run = execute(
        openai_backend,
        llm_server,
        "tom-in-amc",
        "tompro",
        options={"dimensions": ["emotions"], "updates_after_training": False},
        selection={"scene_limit": 1},
    )
    stage1 = RunCall.objects.filter(run=run, unit_key__startswith="tompro1:")
    assert not stage1.filter(unit_key__endswith=":personality").exists()
    (prompt,) = guess_prompts(run).values()
    assert "Emotions: worried" in prompt and "Personality:" not in prompt
    assert "Intentions:" not in prompt


def test_character_memory_probe(openai_backend, llm_server, friends):
    run = execute(
        openai_backend,
        llm_server,
        "tvshowguess",
        "character-memory",
        options={"perturb_names": True},
        selection={"scene_limit": 3},
    )
    records = MentalStateRecord.objects.filter(run=run)
    assert records.count() == 6 and {r.source for r in records} == {"memory"}
    recall = [t for t in prompts(run) if GUESS_MARK not in t]
    # The recall prompt names the real character and title on purpose (Appendix H) ...
    assert len(recall) == 6 and all('"Friends"' in t for t in recall)
    # ... the guessing prompts show the recalled persona under the perturbed names.
    for prompt in guess_prompts(run).values():
        options = re.findall(r"^\([a-z]\) ", prompt, re.MULTILINE)
        assert "Rachel" not in prompt and prompt.count("A proud storyteller") == len(options) > 1
    assert all(Prediction.objects.filter(run=run).values_list("correct", flat=True))


# --- name perturbation -------------------------------------------------------------------


def leaked(texts: list[str], work: Work) -> list[str]:
    words = set()
    for character in Character.objects.filter(work=work, is_main=True):
        words.add(character.name)
        words.update(character.aliases)
    names = re.compile(
        r"(?<!\w)(?:"
        + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
        + r")(?!\w)",
        re.IGNORECASE,
    )
    titles = re.compile(
        r"(?<!\w)(?:"
        + "|".join(r"\s+".join(map(re.escape, t.split())) for t in {work.title, work.key})
        + r")(?!\w)",
        re.IGNORECASE,
    )
    return [m.group(0) for t in texts for m in [*names.finditer(t), *titles.finditer(t)]]


@pytest.mark.parametrize("method", ["icl", "tompro"])
def test_perturbed_prompts_hide_every_main_name_and_the_title(
    openai_backend, llm_server, big_fish, friends, method
):
    for benchmark, work in (("tom-in-amc", big_fish), ("tvshowguess", friends)):
        options = {"perturb_names": True, "perturb_seed": 7}
        if method == "icl":
            options["shots"] = 10
        run = execute(
            openai_backend,
            llm_server,
            benchmark,
            method,
            options=options,
            selection={"scene_limit": 5},
        )
        texts = prompts(run)
        assert texts and leaked(texts, work) == []
        # The same characters keep the same perturbed names across the run.
        predictions = Prediction.objects.filter(run=run)
        assert all(predictions.values_list("correct", flat=True))
        shown = {}
        for p in predictions.select_related("speaker_instance__gold_character"):
            shown.setdefault(p.parsed_answer, set()).add(p.details["shown_as"])
        assert all(len(v) == 1 for v in shown.values())
    # A run without perturbation does show the names (the check can fail).
    plain = execute(
        openai_backend, llm_server, "tvshowguess", "zero-shot", selection={"scene_limit": 5}
    )
    assert leaked(prompts(plain), friends)


def test_names_only_refuses_perturbation(openai_backend, big_fish):
    with pytest.raises(ValueError, match="names-only"):
        run_create(
            benchmark="tom-in-amc",
            method="names-only",
            backend=openai_backend,
            selection={},
            params={"options": {"perturb_names": True}},
            enqueue=False,
        )
    with pytest.raises(ValueError, match="shots"):
        run_plan(
            benchmark="tom-in-amc",
            method="zero-shot",
            backend=openai_backend,
            selection={},
            params={"options": {"shots": 10}},
        )


def test_run_model_command_takes_options(openai_backend, llm_server, friends, capsys):
    llm_server.responder = responder_for(
        gold_answers("tvshowguess", "icl", {"shots": 2}, {"scene_limit": 2})
    )
    call_command(
        "run_model",
        "--benchmark",
        "tvshowguess",
        "--method",
        "icl",
        "--backend",
        openai_backend.name,
        "--option",
        "shots=2",
        "--scene-limit",
        "2",
    )
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED
    assert run.params["options"]["shots"] == 2 and run.selection == {"scene_limit": 2}
