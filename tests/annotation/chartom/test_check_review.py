"""The reviewer queue of CharToM-QA checks: conflicts, the judgement threshold, decisions
with provenance and history, permissions, exports and the report before and after.

Note checks: ``tests.check_disputes`` (four annotators, three notes; the agreement
figures are hand-computed there). Expert judgement: two experts score two answers,
0.2 and 0.8 (spread 0.6, mean 0.5) and 0.5 and 0.6 (spread 0.1). Interval alpha =
1 - (n - 1) * (sum of squared differences of ordered pairs within answers) / (the same
over all pairs of values):
- before: values 0.2, 0.8, 0.5, 0.6: 1 - 3 * (0.72 + 0.02) / 1.5 = -0.48;
- after settling the first at 0.7: values 0.7, 0.7, 0.5, 0.6: 1 - 3 * 0.02 / 0.22 =
  0.7273.
Exact agreement: 0% before, 50% after.
"""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from accounts.services import reviewer_set
from annotation.chartom import check_review, judgement, note_checks
from annotation.chartom.check_decisions import settled_in_force
from annotation.chartom.check_review import CheckReviewError, check_adjudicate
from annotation.chartom.workflow import WorkflowError
from annotation.models import Adjudication, JudgementSample
from reports.tables.chartom_construction import check_review_table
from tests.annotation.chartom.test_judgement import items, make_generative_run  # noqa: F401
from tests.check_disputes import conflicting_note_checks
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SCORES = {0: (0.2, 0.8), 1: (0.5, 0.6)}


@pytest.fixture
def notes():
    return conflicting_note_checks()


@pytest.fixture
def scored(items):  # noqa: F811
    """A judgement sample of two answers, each scored by two experts."""
    run = make_generative_run("judged run", items[:2])
    sample = judgement.judgement_sample_create(name="judged", run_ids=[run.pk], size=2, k=2)
    experts = [UserFactory(username=f"expert{i}", role="annotator") for i in range(2)]
    for i, expert in enumerate(experts):
        while (slot := judgement.judgement_take(annotator=expert, sample=sample)) is not None:
            judgement.judgement_submit(
                assignment_id=slot.pk,
                annotator=expert,
                score=SCORES[slot.task.position][i],
                comment=f"expert {i}",
            )
    tasks = {t.position: t for t in sample.tasks.all()}
    return sample, experts, tasks


def _disputed(kind: str) -> list[int]:
    return [d.task.position for d in check_review.check_disputes(kind=kind) if d.disputed]


# --- conflicts and the threshold --------------------------------------------------------


def test_note_checks_conflict_when_the_labels_differ(notes):
    assert _disputed("note_check") == [1, 2]
    found = {d.task.position: d for d in check_review.check_disputes(kind="note_check")}
    assert (found[0].disputed, found[0].rule_outcome) == (False, "accurate")
    assert (found[1].rule_outcome, found[2].rule_outcome) == ("accurate", "split")
    assert found[2].rule_reason == "no majority: 2 accurate, 2 inappropriate"
    # Side by side, with the annotators' names, in submission order.
    assert [(a["annotator"], a["value"]) for a in found[1].answers] == [
        ("ann0", "accurate"),
        ("ann1", "accurate"),
        ("ann2", "accurate"),
        ("ann3", "inappropriate"),
    ]


def test_an_open_task_is_not_disputed_yet(book):
    from tests.annotation.chartom.test_note_checks import make_notes

    batch = make_notes(book, kept=1)
    note_checks.note_check_sample(batch=batch, size=1, k=3)
    for i, label in enumerate(["accurate", "inappropriate"]):
        user = UserFactory(username=f"early{i}", role="annotator")
        slot = note_checks.note_check_take(annotator=user, batch=batch)
        note_checks.note_check_submit(assignment_id=slot.pk, annotator=user, label=label)
    assert check_review.check_disputes() == []  # the third annotator has not answered


def test_the_judgement_threshold_picks_the_disputed_answers(scored, researcher, client):
    sample = scored[0]
    assert sample.review_spread == 0.3  # the default
    assert _disputed("judgement") == [0]
    answer = next(d for d in check_review.check_disputes(kind="judgement") if d.disputed)
    assert (answer.spread, answer.rule_outcome) == (0.6, "0.5")
    for spread, disputed in ((0.7, []), (0.6, [0]), (0.1, [0, 1])):
        check_review.judgement_review_spread_set(sample=sample, spread=spread)
        assert _disputed("judgement") == disputed
    for bad in ("0", "1.5", "0.25", "x"):
        with pytest.raises(WorkflowError, match="review spread"):
            check_review.judgement_review_spread_set(sample=sample, spread=bad)
    # The researcher sets it on the queue page; a bad one is refused naming the field.
    client.force_login(researcher)
    url = reverse("annotation:chartom-check-review-threshold", args=[sample.pk])
    response = client.post(url, {f"s{sample.pk}-spread": "2"}, follow=True)
    assert "review spread" in response.content.decode()
    client.post(url, {f"s{sample.pk}-spread": "0.5"})
    sample.refresh_from_db()
    assert sample.review_spread == 0.5 and _disputed("judgement") == [0]


def test_the_sampling_form_stores_the_threshold(runs, researcher, client):
    client.force_login(researcher)

    def sample(name: str, spread: str):
        fields = {"name": name, "size": "3", "seed": "0", "k": "2", "review_spread": spread}
        return client.post(
            reverse("annotation:chartom-judgement-sample-create"),
            {
                "judgement-runs": [str(runs[0].pk)],
                **{f"judgement-{k}": v for k, v in fields.items()},
            },
        )

    assert sample("with threshold", "0.4").status_code == 302
    assert JudgementSample.objects.get(name="with threshold").review_spread == 0.4
    refused = sample("bad threshold", "3")
    assert (
        refused.status_code == 400 and "review_spread" in refused.context["judgement_form"].errors
    )
    # Left empty: the default.
    assert sample("default threshold", "").status_code == 302
    assert JudgementSample.objects.get(name="default threshold").review_spread == 0.3


@pytest.fixture
def runs(items):  # noqa: F811
    return [make_generative_run("threshold run", items)]


# --- deciding ---------------------------------------------------------------------------


def test_decide_change_withdraw_with_provenance_and_history(notes, researcher):
    _, _, tasks = notes
    task = tasks[2]
    with pytest.raises(CheckReviewError, match="reason"):
        check_adjudicate(task=task, reviewer=researcher, reason=" ", value="accurate")
    with pytest.raises(CheckReviewError, match="label"):
        check_adjudicate(task=task, reviewer=researcher, reason="why", value="great")
    row = check_adjudicate(
        task=task, reviewer=researcher, reason="The book says so.", value="inappropriate"
    )
    assert (row.outcome, row.rule_outcome, row.reviewer, row.object) == (
        "inappropriate",
        "split",
        researcher,
        None,
    )
    assert row.rule_reason == "no majority: 2 accurate, 2 inappropriate"
    assert [(a["annotator"], a["label"]) for a in row.answers] == [
        ("ann0", "accurate"),
        ("ann1", "accurate"),
        ("ann2", "inappropriate"),
        ("ann3", "inappropriate"),
    ]
    # A double submit adds nothing.
    again = check_adjudicate(
        task=task, reviewer=researcher, reason="The book says so.", value="inappropriate"
    )
    assert again.pk == row.pk and Adjudication.objects.count() == 1
    # The settled label wins where the labels are read; the annotators' stay for "before".
    labels = [j.label for j in note_checks.note_check_judgements() if j.note_id == task.note_id]
    assert labels == ["inappropriate"] * 4
    own = [
        j.label
        for j in note_checks.note_check_judgements(settled=False)
        if j.note_id == task.note_id
    ]
    assert own == ["accurate", "accurate", "inappropriate", "inappropriate"]
    # Change: a new row in force; the old stays.
    check_adjudicate(task=task, reviewer=researcher, reason="On reflection.", value="accurate")
    assert settled_in_force()[task.pk].outcome == "accurate"
    assert check_review.check_decisions_changed()["note_check"] == 1  # split -> accurate
    # Withdraw: the answers count again; withdrawing twice adds one row only.
    assert check_adjudicate(task=task, reviewer=researcher, reason="", withdraw=True) is None
    check_adjudicate(task=task, reviewer=researcher, reason="", withdraw=True)
    assert settled_in_force() == {}
    history = list(Adjudication.objects.filter(task=task).order_by("-pk"))
    assert [h.outcome for h in history] == ["", "accurate", "inappropriate"]
    dispute = check_review.check_disputes(task_ids=[task.pk])[0]
    assert dispute.adjudication is None and len(dispute.history) == 3


def test_a_settled_score_wins_in_table_7_and_counts_as_changed(scored, researcher):
    task = scored[2][0]
    with pytest.raises(CheckReviewError, match="score"):
        check_adjudicate(task=task, reviewer=researcher, reason="r", value="0.75")
    row = check_adjudicate(task=task, reviewer=researcher, reason="Mostly right.", value="0.7")
    assert (row.outcome, row.settled_scores, row.rule_outcome) == ("0.7", {"score": 0.7}, "0.5")
    assert [(a["annotator"], a["score"], a["comment"]) for a in row.answers] == [
        ("expert0", 0.2, "expert 0"),
        ("expert1", 0.8, "expert 1"),
    ]
    assert judgement.judgement_scores()[task.prediction_id] == [0.7, 0.7]
    assert judgement.judgement_scores(settled=False)[task.prediction_id] == [0.2, 0.8]
    assert check_review.check_decisions_changed() == {"note_check": 0, "judgement": 1}
    # Settling on the experts' mean is a decision, not a change.
    check_adjudicate(task=task, reviewer=researcher, reason="The mean is fair.", value="0.5")
    assert check_review.check_decisions_changed()["judgement"] == 0


# --- pages and permission ----------------------------------------------------------------


def test_permission_403_and_an_annotator_reviewer_never_sees_their_own(notes, researcher, client):
    _, annotators, tasks = notes
    outsider = UserFactory(username="ann-new", role="annotator")
    queue = reverse("annotation:chartom-check-review")
    task_url = reverse("annotation:chartom-check-review-task", args=[tasks[1].pk])
    client.force_login(outsider)
    for url in (queue, task_url):
        response = client.get(url)
        assert response.status_code == 403 and "reviewer permission" in response.content.decode()
    assert response.templates[0].name == "403.html"
    checks = client.get(reverse("annotation:chartom-checks")).content.decode()
    assert 'data-testid="check-review-link"' not in checks
    reviewer_set(user=outsider, allowed=True)
    outsider = type(outsider).objects.get(pk=outsider.pk)  # fresh permission cache
    client.force_login(outsider)
    checks = client.get(reverse("annotation:chartom-checks")).content.decode()
    assert 'data-testid="check-review-link"' in checks
    home = client.get(reverse("home")).content.decode()
    assert 'data-testid="home-check-review"' in home
    page = client.get(queue)
    assert [d.task.position for d in page.context["notes"]] == [1, 2]
    assert client.get(task_url).status_code == 200
    # They may review, not set thresholds nor download everything.
    assert client.get(reverse("annotation:chartom-check-decisions-csv")).status_code == 403
    # One who checked these notes sees none of them.
    reviewer_set(user=annotators[0], allowed=True)
    client.force_login(annotators[0])
    assert client.get(queue).context["notes"] == []
    assert client.get(task_url).status_code == 404


def test_the_page_decides_with_a_reason_and_a_double_post_adds_nothing(notes, researcher, client):
    _, _, tasks = notes
    client.force_login(researcher)
    url = reverse("annotation:chartom-check-review-task", args=[tasks[1].pk])
    page = client.get(url)
    assert page.status_code == 200 and page.context["dispute"].rule_outcome == "accurate"
    html = page.content.decode()
    assert all(f">{name}</th>" in html for name in ("ann0", "ann1", "ann2", "ann3"))
    assert 'data-key="3"' in html  # the keys pick a label
    refused = client.post(url, {"value": "accurate", "reason": ""})
    assert refused.status_code == 400 and "reason: say why" in refused.content.decode()
    refused = client.post(url, {"value": "nonsense", "reason": "x"})
    assert refused.status_code == 400 and "value" in refused.context["form"].errors
    assert Adjudication.objects.count() == 0
    posted = {"value": "accurate", "reason": "Three readers agree and the text backs them."}
    response = client.post(url, posted)
    # On to the next note to settle.
    assert response.url == reverse("annotation:chartom-check-review-task", args=[tasks[2].pk])
    client.post(url, posted)
    assert Adjudication.objects.filter(task=tasks[1]).count() == 1
    queue = client.get(reverse("annotation:chartom-check-review"))
    assert queue.context["open"] == 1 and queue.context["changed"]["note_check"] == 0
    # Undo from the page.
    client.post(url, {"undo": "1", "undo_reason": "too quick"})
    assert client.get(reverse("annotation:chartom-check-review")).context["open"] == 2
    assert (
        client.get(reverse("annotation:chartom-check-review-task", args=[999999])).status_code
        == 404
    )


# --- report, export, API ----------------------------------------------------------------


def _row(table, name: str) -> dict:
    return dict(zip(table.columns, next(r for r in table.rows if r[0] == name), strict=True))


def test_the_report_shows_agreement_before_and_after_and_the_decisions_changed(
    notes, scored, researcher
):
    _, _, tasks = notes
    answers = scored[2]

    def table():
        return check_review_table(
            note_checks.note_check_judgements(settled=False), note_checks.note_check_judgements()
        )

    before = _row(table(), "Note checks")
    assert (before["Items with 2+ answers"], before["Disputed"], before["Decisions changed"]) == (
        3,
        2,
        0,
    )
    assert (before["Agreement before %"], before["Alpha before"]) == (61.11, 0.0494)
    assert before["Agreement after %"] == 61.11
    check_adjudicate(task=tasks[1], reviewer=researcher, reason="majority", value="accurate")
    check_adjudicate(task=tasks[2], reviewer=researcher, reason="book", value="inappropriate")
    check_adjudicate(task=answers[0], reviewer=researcher, reason="fair", value="0.7")
    after = table()
    notes_row, scores_row = _row(after, "Note checks"), _row(after, "Expert judgement")
    assert (notes_row["Settled by a reviewer"], notes_row["Decisions changed"]) == (2, 1)
    assert (notes_row["Agreement before %"], notes_row["Alpha before"]) == (61.11, 0.0494)
    assert (notes_row["Agreement after %"], notes_row["Alpha after"]) == (100.0, 1.0)
    assert (scores_row["Disputed"], scores_row["Decisions changed"]) == (1, 1)
    assert (scores_row["Alpha before"], scores_row["Alpha after"]) == (-0.48, 0.7273)
    assert scores_row["Agreement before %"] == 0.0 and scores_row["Agreement after %"] == 50.0


def test_the_decisions_csv_and_api_hold_the_provenance(notes, scored, researcher, client):
    _, annotators, tasks = notes
    check_adjudicate(task=tasks[2], reviewer=researcher, reason="book", value="inappropriate")
    check_adjudicate(task=tasks[2], reviewer=researcher, reason="", withdraw=True)
    check_adjudicate(task=tasks[1], reviewer=researcher, reason="=majority", value="accurate")
    client.force_login(researcher)
    response = client.get(reverse("annotation:chartom-check-decisions-csv"))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["task"], r["outcome"], r["in_force"]) for r in rows] == [
        (str(tasks[1].pk), "accurate", "True"),
        (str(tasks[2].pk), "", "False"),
        (str(tasks[2].pk), "inappropriate", "False"),
    ]
    assert rows[0]["reason"] == "'=majority"  # formula-safe
    assert rows[2]["rule_outcome"] == "split" and "ann3" in rows[2]["answers"]
    api = client.get(reverse("annotation-chartom-check-decisions"), {"kind": "note_check"})
    assert api.status_code == 200
    results = api.json()["results"] if isinstance(api.json(), dict) else api.json()
    assert [(r["task"], r["outcome"], r["in_force"], r["changed"]) for r in results] == [
        (tasks[1].pk, "accurate", True, False),
        (tasks[2].pk, "", False, False),
        (tasks[2].pk, "inappropriate", False, True),
    ]
    assert results[0]["reviewer"] == researcher.username
    assert (
        client.get(reverse("annotation-chartom-check-decisions"), {"kind": "x"}).status_code == 400
    )
    assert client.get(reverse("annotation-chartom-check-decisions"), {"kind": "judgement"}).json()
    client.force_login(annotators[0])
    assert client.get(reverse("annotation-chartom-check-decisions")).status_code == 403


def test_the_one_review_queue_lists_the_conflicting_checks(notes, researcher, client):
    """ "Review disagreements" is the one queue: its index counts the CharToM-QA checks in
    conflict beside the DynToM batches, and the checks' page leads back to it."""
    _, annotators, tasks = notes
    client.force_login(researcher)
    page = client.get(reverse("annotation:review"))
    assert page.status_code == 200
    rows = {c["kind"]: c for c in page.context["checks"]}
    assert (rows["note_check"]["disputed"], rows["note_check"]["open"]) == (2, 2)
    assert rows["note_check"]["changed"] == 0 and rows["judgement"]["disputed"] == 0
    html = page.content.decode()
    assert 'data-testid="review-checks"' in html
    assert reverse("annotation:chartom-check-review") + "#notes-title" in html
    check_adjudicate(
        task=tasks[2], reviewer=researcher, reason="The book says so.", value="accurate"
    )
    rows = {c["kind"]: c for c in client.get(reverse("annotation:review")).context["checks"]}
    assert (rows["note_check"]["open"], rows["note_check"]["changed"]) == (1, 1)
    queue = client.get(reverse("annotation:chartom-check-review")).content.decode()
    assert f'href="{reverse("annotation:review")}">Review disagreements</a>' in queue
    # An annotator-reviewer is not counted the tasks they answered themselves.
    reviewer_set(user=annotators[0], allowed=True)
    client.force_login(type(annotators[0]).objects.get(pk=annotators[0].pk))
    rows = {c["kind"]: c for c in client.get(reverse("annotation:review")).context["checks"]}
    assert rows["note_check"]["disputed"] == 0
