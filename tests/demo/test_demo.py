"""The demo data in fixtures/demo and the load_demo command that `make run` calls."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError

from accounts.roles import has_role
from accounts.services import user_create_with_role
from benchmarks.models import (
    Benchmark,
    DynToMStage,
    QAItem,
    SpeakerInstance,
    Work,
)
from demo.management.commands import load_demo
from tests.demo.loads import COUNTED, LOGINS, MODELS, run_demo

pytestmark = pytest.mark.django_db

DEMO = load_demo.DEMO_DIR
WINDOW = 12  # words; a shared run this long is copying, not coincidence


def test_load_demo_fills_every_benchmark_and_creates_the_logins(client):
    out = run_demo()

    movie = Work.objects.get(benchmark=Benchmark.TOM_IN_AMC)
    assert (movie.key, movie.kind, movie.split) == ("The Lighthouse Keepers", "movie", "test")
    assert list(movie.characters.values_list("name", "utterance_count")) == [
        ("mags", 23),
        ("tomas", 21),
        ("juno", 15),
        ("iris", 14),
        ("fenwick", 10),
    ]
    assert Counter(movie.scenes.values_list("part", flat=True)) == {"training": 6, "testing": 4}
    assert SpeakerInstance.objects.filter(scene__work=movie).count() == 12

    books = Work.objects.filter(benchmark=Benchmark.CHARTOM_QA).order_by("key")
    assert [(b.key, b.kind, b.split) for b in books] == [
        ("The Glass Orchard by ToMLab contributors", "book", "test"),
        ("The Night Ferry by ToMLab contributors", "book", "test"),
    ]
    for book in books:
        assert set(book.qa_items.values_list("dimension", flat=True)) == {
            "belief",
            "intention",
            "emotion",
            "desire",
        }
        assert book.characters.count() == 3
    assert [b.qa_items.count() for b in books] == [5, 4]
    # Both plot windows, cut from the demo books: the read/not-read study needs them.
    assert not QAItem.objects.filter(context_2000__isnull=True).exists()
    assert "plot windows: 9 of 9 items got context_1000/context_2000" in out

    stage = DynToMStage.objects.get(work__benchmark=Benchmark.DYNTOM)
    assert (stage.work.key, stage.work.split) == ("trial_demo1", "test")
    assert (stage.main_character, stage.location, stage.scenario_count) == (
        "Hana Okafor",
        "bakery",
        4,
    )
    assert stage.scenarios.count() == 4
    assert Counter(stage.questions.values_list("question_type", flat=True)) == {
        "understanding": 5,
        "transformation-1": 4,
        "transformation-2": 7,
        "transformation-3": 4,
    }
    families = {re.sub(r"_\d+$", "", key) for key in stage.questions.values_list("key", flat=True)}
    assert families == {"type_a_what", "type_d_whether", "type_d_why", "type_c_how", "type_d_how"}

    # A benchmark of ours brought in through a field mapping, saved as a preset.
    from benchmarks.models import MappingPreset

    mini = Work.objects.get(benchmark=Benchmark.GENERIC)
    assert (mini.key, mini.kind, mini.title) == ("mini-tom@1", "item_set", "Mini ToM")
    assert Counter(mini.mc_items.values_list("categories__ability", flat=True)) == {
        "False belief": 3,
        "Hidden emotions": 3,
        "Discrepant desires": 3,
        "Knowledge and perception": 3,
    }
    assert MappingPreset.objects.filter(name="Mini ToM (demo)").exists()

    assert "demo data: 86 created, 0 unchanged, 0 updated" in out
    # CharToM-QA construction: the novel from the shared data and three notes of ours.
    from annotation.models import Construction, NoteBatch

    chartom = NoteBatch.objects.get(name="CharToM-QA demo")
    assert chartom.notes.count() == 3
    assert Construction.objects.filter(note__batch=chartom, stage="filter").count() == 12
    assert "CharToM-QA demo batch: CharToM-QA demo, 3 notes" in out
    # Each of the three demo studies has two demo participants' answers in and prints
    # three invite links; the scene study keeps a place for the demo rater account.
    from studies.models import Study

    demo_study = Study.objects.get(benchmark="tom-in-amc")
    assert demo_study.overlap == 6 and demo_study.participants.count() == 5
    assert out.count("  invite link: /s/") == 15  # five studies, three links each
    for username, password in LOGINS.items():
        user = get_user_model().objects.get(username=username)
        assert has_role(user, username)
        assert f"{username} / {password} ({username}): created" in out
        assert client.login(username=username, password=password)
        client.logout()


def test_existing_demo_user_keeps_its_password_unless_reset(client):
    user_create_with_role(username="rater", password="changed-by-hand-1", role="rater")

    out = run_demo()

    assert "rater / tomlab-rater (rater): already exists, password kept" in out
    assert client.login(username="rater", password="changed-by-hand-1")
    assert not client.login(username="rater", password="tomlab-rater")

    out = run_demo("--reset-passwords")

    assert "rater / tomlab-rater (rater): password reset" in out
    assert client.login(username="rater", password="tomlab-rater")


def test_rejected_fixture_loads_nothing(tmp_path, monkeypatch):
    broken = tmp_path / "dyntom"
    shutil.copytree(DEMO / "dyntom", broken)
    questions_path = broken / "trial_demo1" / "question_new.json"
    questions = json.loads(questions_path.read_text())
    questions["type_d_why_5"]["true answer"] = "z"
    questions_path.write_text(json.dumps(questions))
    # The broken source comes last, after the other two imported fine inside the
    # command's transaction: they must be rolled back with it.
    sources = (*load_demo.DEMO_SOURCES[:2], load_demo.DemoSource("dyntom", broken, "test"))
    monkeypatch.setattr(load_demo, "DEMO_SOURCES", sources)

    with pytest.raises(CommandError) as excinfo:
        run_demo()

    message = str(excinfo.value)
    assert str(questions_path) in message
    assert "type_d_why_5" in message
    assert "'true answer'" in message
    assert all(model.objects.count() == 0 for model in MODELS)
    assert not get_user_model().objects.filter(username__in=LOGINS).exists()


# The fixtures themselves -----------------------------------------------------------


def fountain_scenes(text: str) -> list[tuple[str, Counter]]:
    """(heading, speaker cue counts) per scene of a Fountain screenplay."""
    scenes: list[tuple[str, Counter]] = []
    for block in re.split(r"\n\s*\n", text):
        first, _, rest = block.strip().partition("\n")
        if re.match(r"(INT|EXT)\. ", first):
            scenes.append((first, Counter()))
        elif scenes and rest and re.fullmatch(r"[A-Z][A-Z .'-]*( \(.*\))?", first):
            scenes[-1][1][re.sub(r" \(.*\)$", "", first).lower()] += 1
    return scenes


def unmask(text: str, codes: dict[str, str]) -> str:
    return re.sub(r"\bP\d+\b", lambda m: codes[m.group()], text)


def test_tom_in_amc_fixture_is_the_screenplay_story():
    screenplay = fountain_scenes(
        (DEMO / "screenplay" / "the_lighthouse_keepers.fountain").read_text(encoding="utf-8")
    )
    movie = json.loads((DEMO / "tom_in_amc.json").read_text(encoding="utf-8"))["test"][
        "The Lighthouse Keepers"
    ]
    scenes = movie["training_scenes"] + movie["testing_scenes"]

    assert len(movie["training_scenes"]) == len(scenes) * 3 // 5
    assert len(scenes) == len(screenplay) == 10
    total: Counter = Counter()
    for scene, (heading, speakers) in zip(scenes, screenplay, strict=True):
        codes = {code: name for name, code in scene["char_map"].items()}
        assert unmask(scene["scene"][0]["title"], codes) == heading.lower()
        spoken = Counter(
            unmask(line["title"], codes) for line in scene["scene"] if line["type"] == "dialog"
        )
        assert spoken == speakers == scene["chars"]
        total += speakers
    assert movie["chars"] == dict(total.most_common(5))
    for scene in movie["testing_scenes"]:
        masked = sorted(name for name in scene["chars"] if name in movie["chars"])
        assert sorted(scene["char_map"]) == masked
        assert sorted(scene["char_map"].values()) == [f"P{i}" for i in range(len(masked))]
        text = " ".join(line["title"] + " " + line["text"] for line in scene["scene"])
        assert not any(re.search(rf"\b{name}\b", text) for name in masked)


def test_chartom_contexts_are_excerpts_of_the_demo_books():
    books = {
        "The Glass Orchard by ToMLab contributors": "the_glass_orchard.txt",
        "The Night Ferry by ToMLab contributors": "the_night_ferry.txt",
    }
    items = [json.loads(line) for line in (DEMO / "chartom_qa.jsonl").read_text().splitlines()]

    assert len(items) == 9
    assert Counter(item["book_name"] for item in items) == dict(zip(books, (5, 4), strict=True))
    for item in items:
        book = (DEMO / "books" / books[item["book_name"]]).read_text(encoding="utf-8")
        # "..... " marks a window that starts mid-book, as in the published items.
        context_0 = item["context_0"].removeprefix("..... ")
        assert context_0 in book
        if item["context_1000"] is not None:
            context_1000 = item["context_1000"].removeprefix("..... ")
            assert context_1000 in book
            assert context_1000.endswith(context_0)
        assert item["context_2000"] is None  # cut from the book by the import
        assert len(item["misleading_choices"]) == 3
        assert 2 <= len(item["bonus_points"]) <= 3


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def windows(text: str) -> Iterator[str]:
    tokens = words(text)
    for i in range(len(tokens) - WINDOW + 1):
        yield " ".join(tokens[i : i + WINDOW])


def strings(value: Any, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every string in a JSON value, leaving out the values of keys in ``skip``."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item, skip)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in skip:
                yield from strings(item, skip)


def fixture_texts() -> Iterator[tuple[str, str]]:
    """(file, text) for every piece of prose we wrote."""
    for path in (
        DEMO / "screenplay" / "the_lighthouse_keepers.fountain",
        DEMO / "books" / "the_glass_orchard.txt",
        DEMO / "books" / "the_night_ferry.txt",
    ):
        yield path.name, path.read_text(encoding="utf-8")
    # The construction batch's notes and replies, the demo answers, the predictions.
    for path in (DEMO / "chartom_construction.json", DEMO / "human_answers.json"):
        for text in strings(json.loads(path.read_text(encoding="utf-8"))):
            yield path.name, text
    for path in sorted((DEMO / "predictions").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for text in strings(json.loads(line)):
                yield f"predictions/{path.name}", text
    for text in strings(json.loads((DEMO / "tom_in_amc.json").read_text(encoding="utf-8"))):
        yield "tom_in_amc.json", text
    for line in (DEMO / "chartom_qa.jsonl").read_text(encoding="utf-8").splitlines():
        for text in strings(json.loads(line)):
            yield "chartom_qa.jsonl", text
    # DynToM's question wording, option-reason labels and profile sentence are the
    # format's own templates, shared by every stage; the rest is our content.
    format_templates = frozenset(
        {"question", "reason", "explain", "short", "characters information"}
    )
    for path in sorted((DEMO / "dyntom").glob("*/*.json")):
        for text in strings(json.loads(path.read_text(encoding="utf-8")), format_templates):
            yield f"{path.parent.name}/{path.name}", text


def shared_texts(shared_data: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(shared_data.rglob("*")):
        if not path.is_file() or path.name == "PROVENANCE.md":
            continue
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        if path.suffix == ".json":
            # One string at a time, so JSON keys do not break up a copied sentence.
            for value in strings(json.loads(text)):
                yield str(path.relative_to(shared_data)), value
        else:
            yield str(path.relative_to(shared_data)), text


def test_no_fixture_copies_a_long_run_of_the_real_data(shared_data):
    ours: dict[str, str] = {}
    for name, text in fixture_texts():
        for window in windows(text):
            ours.setdefault(window, name)
    assert len(ours) > 5000  # the check must have something to check

    copied = {
        (ours[window], source, window)
        for source, text in shared_texts(shared_data)
        for window in windows(text)
        if window in ours
    }

    assert not copied, f"{len(copied)} shared {WINDOW}-word run(s), e.g. {sorted(copied)[:3]}"


def test_a_refused_construction_loads_nothing(tmp_path, monkeypatch):
    demo = tmp_path / "demo"
    shutil.copytree(DEMO, demo)
    fixture = json.loads((demo / "chartom_construction.json").read_text(encoding="utf-8"))
    del fixture["notes"][2]["constructions"]["desire"]["verify"]
    (demo / "chartom_construction.json").write_text(json.dumps(fixture), encoding="utf-8")
    monkeypatch.setattr(load_demo, "DEMO_DIR", demo)

    with pytest.raises(CommandError) as excinfo:
        run_demo()

    message = str(excinfo.value)
    assert "nothing was loaded" in message
    assert "Agnes Quill" in message and "no recorded verification" in message
    assert all(model.objects.count() == 0 for model in COUNTED)
    assert not get_user_model().objects.exists()
