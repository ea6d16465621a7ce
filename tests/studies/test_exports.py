"""Study exports (issue #28, part 3): responses and exit answers as CSV, JSON and through
the API, one row function behind all three; excluded participants left out unless
``include_excluded``; practice and attention rows flagged; every exit answer paired with
the wording of the version it answered; researchers only."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from studies import exports, selectors, services
from studies.api import serializers as api_serializers
from studies.choice import exchange
from studies.choice import services as cs
from studies.models import Assignment, Participant, StudyTextVersion
from studies.participation import recruitment
from studies.participation.ledger import participant_exclusion_override
from studies.participation.services import participants_invite

from .test_choice_services import _join, chartom_study
from .test_rater_views import current, instances, invite, keep_scenes, to_scenes, url

pytestmark = [pytest.mark.django_db, pytest.mark.module_rows("friends")]

NEW_COLUMNS = {
    "excluded",
    "exclusion_reason",
    "role",
    "practice",
    "attention_check",
    "confidence",
    "seconds_total",
    "seconds_active",
}


@pytest.fixture
def res_client(client, researcher):
    client.force_login(researcher)
    return client


def _files(client, study, name: str, query: str = "") -> tuple[list[list[str]], list[dict]]:
    """The CSV (header first) and JSON export of ``name`` (responses or exit)."""
    got = {}
    for fmt in ("csv", "json"):
        response = client.get(reverse(f"studies:{name}-{fmt}", args=[study.pk]) + query)
        assert response.status_code == 200, response
        assert "attachment" in response["Content-Disposition"]
        got[fmt] = response.getvalue().decode()
    return list(csv.reader(io.StringIO(got["csv"]))), json.loads(got["json"])


def _api(client, study, name: str, query: str = "") -> list[dict]:
    sep = "&" if query else "?"
    response = client.get(
        reverse(f"studies-{name}", args=[study.pk]) + query + f"{sep}page_size=200"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == len(body["results"])  # one page holds them all
    return body["results"]


def _as_csv(value) -> str:
    return "" if value is None else str(value)


def _agree(table: list[list[str]], rows: list[dict], api_rows: list[dict], columns: list[str]):
    """The three surfaces carry the same columns and the same rows."""
    assert table[0] == columns
    assert api_rows == rows
    assert all(list(row) == columns for row in rows)
    assert table[1:] == [[_as_csv(row[c]) for c in columns] for row in rows]


def _answer_scene(client, participant, *, cant: bool = False, confidence: str = "") -> Assignment:
    """Submit the participant's current scene through the page, right answers (or "can't
    tell" for the first speaker)."""
    assignment = current(participant)
    first, *rest = instances(assignment)
    data = {f"choice-{i.pk}": str(i.candidates.index(i.gold_character.name)) for i in rest}
    gold = str(first.candidates.index(first.gold_character.name))
    data[f"choice-{first.pk}"] = "cant" if cant else gold
    if confidence:
        data["confidence"] = confidence
    response = client.post(url("scene-submit", participant, assignment_id=assignment.pk), data)
    assert response.status_code == 302
    assignment.refresh_from_db()
    assert assignment.status == Assignment.Status.SUBMITTED
    return assignment


@pytest.fixture
def answered(client, live_study):
    """Ann and Ben each answered a practice scene, an attention check and a test scene
    (Ben's first speaker "can't tell", confidence 2); Ben is then excluded."""
    live_study.allow_cant_tell = live_study.ask_confidence = True
    live_study.save(update_fields=["allow_cant_tell", "ask_confidence"])
    keep_scenes(live_study, 3)
    practice, check, _test = live_study.study_items.filter(held_back=False).order_by("position")
    recruitment.item_roles_set(study=live_study, practice=practice, attention=[check])
    ann, ben = invite(live_study, "Ann"), invite(live_study, "Ben")
    for p, cant, confidence in ((ann, False, "5"), (ben, True, "2")):
        to_scenes(client, p)
        for _ in range(3):
            _answer_scene(client, p, cant=cant, confidence=confidence)
    ben = participant_exclusion_override(
        participant=ben, decision="exclude", reason="answered at random"
    )
    assert ben.excluded_at is not None
    return live_study, ann, ben


def test_scene_responses_agree_across_csv_json_and_api(
    res_client, answered, django_assert_max_num_queries
):
    study = answered[0]
    table, rows = _files(res_client, study, "responses")
    with django_assert_max_num_queries(8):  # a fixed few, whatever the number of rows
        api_rows = _api(res_client, study, "responses")
    _agree(table, rows, api_rows, selectors.RESPONSE_COLUMNS)
    assert set(table[0]) >= NEW_COLUMNS | {"cant_tell"}
    # Excluded participants are left out by default.
    assert {r["participant"] for r in rows} == {"Ann"}
    assert not any(r["excluded"] for r in rows)
    roles = {r["scene"]: (r["role"], r["practice"], r["attention_check"]) for r in rows}
    assert sorted(roles.values()) == [
        ("attention", False, True),
        ("practice", True, False),
        ("test", False, False),
    ]
    assert {r["confidence"] for r in rows} == {5}
    for r in rows:
        assert r["seconds_total"] == pytest.approx(r["total_ms"] / 1000)
        assert r["seconds_active"] == pytest.approx(r["active_ms"] / 1000)

    query = "?include_excluded=1"
    table, rows = _files(res_client, study, "responses", query)
    _agree(table, rows, _api(res_client, study, "responses", query), selectors.RESPONSE_COLUMNS)
    bens = [r for r in rows if r["participant"] == "Ben"]
    assert bens and all(r["excluded"] for r in bens)
    assert {r["exclusion_reason"] for r in bens} == {"answered at random"}
    assert {r["confidence"] for r in bens} == {2}
    # One "can't tell" per scene: the first speaker, answered without a name.
    cant = [r for r in bens if r["cant_tell"]]
    assert len(cant) == 3 and {r["answer"] for r in cant} == {""}
    assert not any(r["cant_tell"] for r in rows if r["participant"] == "Ann")


def test_responses_page_has_the_switch_the_count_and_the_links(res_client, answered):
    study = answered[0]
    page = res_client.get(reverse("studies:responses", args=[study.pk]))
    html = page.content.decode()
    assert page.context["n_excluded"] == 1 and not page.context["include_excluded"]
    assert "Include excluded participants (1)" in html
    assert "1 excluded participant left out" in html
    assert {a.participant.label for a in page.context["page"]} == {"Ann"}
    for name in ("responses-csv", "responses-json", "exit-csv", "exit-json"):
        assert f'href="{reverse(f"studies:{name}", args=[study.pk])}"' in html
    assert ">practice</span>" in html and ">attention check</span>" in html

    page = res_client.get(reverse("studies:responses", args=[study.pk]) + "?include_excluded=1")
    html = page.content.decode()
    assert {a.participant.label for a in page.context["page"]} == {"Ann", "Ben"}
    assert 'value="1" checked' in html and ">excluded</span>" in html
    link = reverse("studies:responses-csv", args=[study.pk]) + "?include_excluded=1"
    assert f'href="{link}"' in html

    bad = res_client.get(reverse("studies:responses", args=[study.pk]) + "?include_excluded=yes")
    assert bad.status_code == 400 and b"include_excluded: 1 or 0" in bad.content
    bad = res_client.get(reverse("studies-responses", args=[study.pk]) + "?include_excluded=maybe")
    assert bad.status_code == 400 and "include_excluded" in bad.json()


def test_choice_responses_agree_and_flag_excluded(res_client):
    study, works = chartom_study(2, 2)
    ann = _join(study, {works[0].pk}, "Ann")
    ben = _join(study, {works[1].pk}, "Ben")
    cs.design_apply(study=study)
    for p in (ann, ben):
        for assignment in Assignment.objects.filter(participant=p):
            cs.choice_record(participant=p, assignment_id=assignment.pk, action="submit", shown=1)
            cs.choice_record(participant=p, assignment_id=assignment.pk, action="keep")
    participant_exclusion_override(participant=ben, decision="exclude", reason="bot")

    table, rows = _files(res_client, study, "responses")
    _agree(table, rows, _api(res_client, study, "responses"), exchange.COLUMNS)
    assert rows and {r["participant"] for r in rows} == {"Ann"}
    assert {"excluded", "exclusion_reason", "role", "practice", "attention_check"} <= set(rows[0])
    assert all(r["seconds"] == pytest.approx(r["ms"] / 1000) for r in rows)
    # The import's own file (choices.csv) is the same rows.
    old = res_client.get(reverse("studies:choice-export", args=[study.pk, "csv"]))
    assert list(csv.reader(io.StringIO(old.getvalue().decode()))) == table

    query = "?include_excluded=1"
    table, rows = _files(res_client, study, "responses", query)
    _agree(table, rows, _api(res_client, study, "responses", query), exchange.COLUMNS)
    assert {(r["participant"], r["excluded"], r["exclusion_reason"]) for r in rows} == {
        ("Ann", False, ""),
        ("Ben", True, "bot"),
    }
    page = res_client.get(reverse("studies:responses", args=[study.pk]))
    assert "Include excluded participants (1)" in page.content.decode()
    assert {row["assignment"].participant.label for row in page.context["rows"]} == {"Ann"}


def _finish_with_exit(client, study, label: str, answers: dict[str, str]) -> Participant:
    participant = invite(study, label)
    to_scenes(client, participant)
    _answer_scene(client, participant)
    assert "A few last questions" in client.get(url("start", participant)).content.decode()
    done = client.post(url("exit", participant), answers, follow=True)
    assert done.status_code == 200 and done.redirect_chain
    participant.refresh_from_db()
    return participant


def test_exit_answers_keep_the_wording_of_the_version_answered(
    client, researcher, live_study, django_assert_max_num_queries
):
    keep_scenes(live_study, 1)
    recruitment.exit_questions_save(
        study=live_study,
        questions=recruitment.exit_questions_parse("Age: 18-30 | 31+\nComments"),
    )
    assert live_study.exit_questions_version == 2  # version 1 had no questions
    ann = _finish_with_exit(client, live_study, "Ann", {"q1": "31+", "q2": "fine"})
    # The researcher rewords both questions between two participants.
    live_study.refresh_from_db()
    recruitment.exit_questions_save(
        study=live_study,
        questions=recruitment.exit_questions_parse("Age band: 18-40 | 41+\nHow hard was it?"),
    )
    same = recruitment.exit_questions_save(study=live_study, questions=live_study.exit_questions)
    assert same.exit_questions_version == 3  # saving the same questions is no new version
    ben = _finish_with_exit(client, live_study, "Ben", {"q1": "41+"})
    assert (ann.exit_version, ben.exit_version) == (2, 3)
    snapshots = StudyTextVersion.objects.filter(study=live_study, kind="exit_questions")
    assert [(s.version, [q["label"] for q in s.content]) for s in snapshots] == [
        (1, []),
        (2, ["Age", "Comments"]),
        (3, ["Age band", "How hard was it?"]),
    ]

    client.force_login(researcher)
    table, rows = _files(client, live_study, "exit")
    with django_assert_max_num_queries(8):
        api_rows = _api(client, live_study, "exit-answers")
    _agree(table, rows, api_rows, exports.EXIT_COLUMNS)
    got = [(r["participant_id"], r["version"], r["question"], r["answer"]) for r in rows]
    assert got == [
        (ann.pk, 2, "Age", "31+"),
        (ann.pk, 2, "Comments", "fine"),
        (ben.pk, 3, "Age band", "41+"),
        (ben.pk, 3, "How hard was it?", ""),  # skipped: every question is optional
    ]
    assert {r["choices"] for r in rows if r["key"] == "q1"} == {"18-30 | 31+", "18-40 | 41+"}
    assert "Ann" not in json.dumps(rows)  # participants by id only
    assert {r["status"] for r in rows} == {"finished"}

    participant_exclusion_override(participant=ann, decision="exclude", reason="a colleague")
    _table, rows = _files(client, live_study, "exit")
    assert {r["participant_id"] for r in rows} == {ben.pk}
    _table, rows = _files(client, live_study, "exit", "?include_excluded=1")
    assert {(r["participant_id"], r["excluded"]) for r in rows} == {(ann.pk, True), (ben.pk, False)}


def test_instruction_and_consent_versions_are_kept(live_study):
    services.study_update_texts(study=live_study, instructions="Read first.", consent="I agree.")
    services.study_update_texts(study=live_study, instructions="Read first.", consent="I agree.")
    assert live_study.instructions_version == 2
    texts = StudyTextVersion.objects.filter(study=live_study)
    assert sorted((t.kind, t.version, t.content) for t in texts) == [
        ("consent", 1, ""),
        ("consent", 2, "I agree."),
        ("instructions", 1, "Guess who speaks."),
        ("instructions", 2, "Read first."),
    ]
    snapshot = services.text_version_ensure(study=live_study, kind="instructions")
    assert (snapshot.version, StudyTextVersion.objects.count()) == (2, 4)  # none added


def test_api_row_documentation_matches_the_export_columns():
    scene = api_serializers.SceneResponseRowSerializer().fields
    choice = api_serializers.ChoiceResponseRowSerializer().fields
    exit_ = api_serializers.ExitAnswerRowSerializer().fields
    assert set(scene) == set(selectors.RESPONSE_COLUMNS)
    assert set(choice) == set(exchange.COLUMNS)
    assert set(exit_) == set(exports.EXIT_COLUMNS)


def test_exports_are_for_researchers_only(client, rater, annotator, live_study):
    participants_invite(study=live_study, labels=["Ann"])
    urls = [
        reverse(f"studies:{name}", args=[live_study.pk])
        for name in ("responses", "responses-csv", "responses-json", "exit-csv", "exit-json")
    ] + [reverse(f"studies-{name}", args=[live_study.pk]) for name in ("responses", "exit-answers")]
    for user in (rater, annotator):
        client.force_login(user)
        assert [client.get(u).status_code for u in urls] == [403] * len(urls)
    client.logout()
    api = [client.get(u).status_code for u in urls[-2:]]
    assert api == [403, 403]
    assert all(client.get(u).status_code == 302 for u in urls[:-2])  # to the login page
