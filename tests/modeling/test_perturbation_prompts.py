"""Perturbed prompts name no lead by any form: given name, surname, full name, title.

Issue #27: perturbed prompts kept the leads' surnames ("Wallace", "Coolidge"), which
give a film away as surely as the first names. Two real screenplays are imported and
run with ``perturb_names``; every stored prompt must be free of every name form of
every lead. The forbidden forms are worked out here from the raw script text and the
alias table, independently of the code under test: the cue names, the aliases, every
capitalised word the script writes after a lead's given name (with the guard below),
those surnames alone and after a title.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmarks.models import Character, Scene, Work
from modeling.models import CachedResponse, RunCall
from modeling.pipelines import get_pipeline
from tests.modeling.test_speaker_guess_pipeline import execute, prompts

pytestmark = pytest.mark.django_db

SCRIPTS = ("big_fish.fountain", "star_wars_a_new_hope.txt")
TITLES = ("Mr", "Mrs", "Ms", "Miss", "Dr")
# Words that are no name: titles, ages, function words.
_NOT_SURNAMES = """mr mrs ms miss dr sir lady lord captain general colonel major sergeant
professor doctor father mother uncle aunt master prince princess king queen officer agent
detective commander admiral chief young younger old older adult little teen baby and or but
nor the a an of to in on at by for with from as is was are were be has had have his her its
their our your my he she it they we you i then now so if when while who what where voice"""
NOT_SURNAMES = set(_NOT_SURNAMES.split())
SEEN_AS_NAME = 3  # an everyday word after a given name counts from this many title-case sightings


@pytest.fixture
def works(db, shared_data: Path) -> list[Work]:
    for name in SCRIPTS:
        call_command(
            "import_benchmark",
            "screenplay",
            str(shared_data / "screenplays" / name),
            "--no-progress",
            verbosity=0,
        )
    return list(Work.objects.filter(benchmark="tom-in-amc").order_by("key"))


def forbidden_forms(work: Work, raw: str) -> tuple[set[str], set[str]]:
    """Every form a lead of ``work`` goes by, from its script ``raw`` and alias table;
    and the surnames among them."""
    characters = list(Character.objects.filter(work=work))
    leads = [c for c in characters if c.is_main]
    lower = set(re.findall(r"\b[a-z][a-z']*\b", raw))

    def words(name: str) -> list[str]:
        return [
            w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", name) if w.lower() not in NOT_SURNAMES
        ]

    # A titled name ("mr. perry") is a surname: only untitled names give a given name.
    given_of_others = {
        words(c.name)[0].lower()
        for c in characters
        if words(c.name) and words(c.name)[0] == c.name.split()[0]
    }
    forms: set[str] = set()
    surnames: set[str] = set()
    for lead in leads:
        given = words(lead.name)[0]
        forms.add(given)
        for alias in lead.aliases:
            forms.add(alias)
            forms.update(w for w in words(alias) if len(w) >= 3)
        # "<Given> <Capitalised>" on one line or a wrapped one (the next line indented; a
        # line at the margin starts a new paragraph): the given name capitalised and not
        # possessive; the next word in the same style ("Edward WHISTLES" is a sound, "HAN"
        # over "Thanks" a cue over its speech); no title, function word or other
        # character's given name; a word the script writes in lower case only if seen
        # several times as a name.
        pair = (
            rf"\b((?i:{re.escape(given)}))(?:[ \t]+|[ \t]*\n[ \t]+)([A-Z][A-Za-z]+(?:-[A-Za-z]+)*)"
        )
        pairs = Counter((m.group(1), m.group(2)) for m in re.finditer(pair, raw))
        for first, surname in pairs:
            if not first[0].isupper() or surname.isupper() != first.isupper():
                continue
            word = surname.lower()
            if word in NOT_SURNAMES or word in given_of_others - {given.lower()}:
                continue
            title_case = sum(n for (_, s), n in pairs.items() if s.istitle() and s.lower() == word)
            if word in lower and title_case < SEEN_AS_NAME:
                continue
            forms.add(f"{given.title()} {surname.title()}")
            surnames.add(surname.title())
    forms |= surnames
    forms |= {f"{title}. {surname}" for title in TITLES for surname in surnames}
    forms |= {f"{title} {surname}" for title in TITLES for surname in surnames}
    return {f for f in forms if len(f) > 1}, surnames


def found(texts: list[str], forms: set[str]) -> Counter:
    pattern = re.compile(
        r"(?<!\w)(?:"
        + "|".join(
            r"\.?\s+".join(map(re.escape, f.replace(".", " ").split()))
            for f in sorted(forms, key=len, reverse=True)
        )
        + r")(?!\w)",
        re.IGNORECASE,
    )
    return Counter(m.group(0).lower() for text in texts for m in pattern.finditer(text))


def test_import_stores_the_full_names_and_masks_them_whole(works):
    aliases = dict(Character.objects.filter(is_main=True).values_list("name", "aliases"))
    assert aliases["sandra"] == ["SANDRA", "SANDRA TEMPLETON", "SANDRA KAY"]
    assert aliases["jenny"] == ["JENNY", "JENNY HILL"]  # "the hill" too, but a name 8 times
    assert aliases["han"] == ["HAN", "HAN'S VOICE", "HAN SOLO"]
    assert aliases["ben"] == ["BEN", "BEN'S VOICE", "BEN KENOBI", "GENERAL KENOBI"]
    testing = Scene.objects.filter(part=Scene.Part.TESTING)
    narration = [
        (scene, line["title"] + " " + line["text"])
        for scene in testing
        for line in scene.lines
        if line["type"] == "scene"
    ]
    # "EDWARD BLOOM" is one code, not "P0 BLOOM"; a unique surname alone is masked.
    leftovers = [t for _, t in narration if re.search(r"\bP\d+ (?i:bloom|hill|solo)\b", t)]
    assert leftovers == []
    ship = next(s for s, t in narration if "ship moves in toward the Death Star trench" in t)
    assert ship.char_map == {"han": "P0"}  # "Solo's ship": Han is there, named by surname
    assert any("P0's ship moves" in line["text"] for line in ship.lines)
    # Bloom is Edward's and Will's: alone it is neither of them.
    assert any("EXT. BLOOM HOUSE" in t for _, t in narration)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "options"),
    [("icl", {"shots": 50}), ("tompro", {"dimensions": ["personality"]})],
)
def test_perturbed_prompts_name_no_lead_by_any_form(
    openai_backend, llm_server, works, shared_data, method, options, client, researcher
):
    forbidden = {
        work.key: forbidden_forms(
            work, (shared_data / "screenplays" / work.source).read_text(errors="replace")
        )
        for work in works
    }
    # The forms the script itself gives away, not only the cue names.
    assert {"Bloom", "Edward Bloom", "Mr. Bloom"} <= forbidden["Big Fish"][0]
    assert {"Skywalker", "Han Solo", "Kenobi", "Organa"} <= forbidden["Star Wars: A New Hope"][0]

    run = execute(
        openai_backend,
        llm_server,
        "tom-in-amc",
        method,
        options={**options, "perturb_names": True, "perturb_seed": 3},
        selection={"scene_limit": 12},
    )

    # Each prompt is about one work (its unit key names it): checked against that work's
    # forms, since one work's name may be another's ordinary word ("will").
    texts = prompts(run)
    pipeline = get_pipeline("tom-in-amc")
    for work in works:
        keys = RunCall.objects.filter(run=run, unit_key__contains=f":{work.key}:")
        cached = CachedResponse.objects.filter(key__in=keys.values("cache_key"))
        own = [
            m["content"] for r in cached.values_list("request", flat=True) for m in r["messages"]
        ]
        assert own
        forms, surnames = forbidden[work.key]
        leaks = found(own, forms)
        assert not leaks, (work.key, sorted(leaks.items()))
        # The new names are there: the forms were replaced, not dropped ...
        view = pipeline.view(work, method, run.params["options"])
        joined = "\n".join(own)
        leads = [view.name(c.name) for c in view.mains]
        assert all(re.search(rf"\b{re.escape(name)}\b", joined) for name in leads), leads
        # ... and a surname as a surname ("the Bloom house" -> "the Hayes house").
        folded = {s.casefold() for s in surnames}
        new = [shown for k, shown in view.name_map.items() if k.casefold() in folded]
        assert any(re.search(rf"\b{shown}\b", joined) for shown in new), new
    assert sum(
        RunCall.objects.filter(run=run, unit_key__contains=f":{w.key}:").count() for w in works
    ) == len(texts)

    # The run page lists the forms replaced, per work, as the prompts showed them.
    client.force_login(researcher)
    html = client.get(reverse("modeling:run-detail", args=[run.pk])).content.decode()
    assert html.count('data-testid="name-forms"') == 2
    view = pipeline.view(works[1], method, run.params["options"])
    shown = view.name_map["HAN SOLO"]
    assert re.search(rf"<td>HAN SOLO</td>\s*<td>full</td>\s*<td><strong>{shown}</strong>", html)
