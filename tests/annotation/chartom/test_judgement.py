"""Expert judgement of generative CharToM-QA answers (Appendix E): seeded samples over
runs, scores 0-1.0 in steps of 0.1, and a blind screen that never shows the LLM judge's
output, the bonus points, or which run or model answered."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.chartom import judgement
from annotation.chartom.workflow import WorkflowError
from annotation.models import AnnotationTask, JudgementSample, TaskAssignment
from benchmarks.models import Benchmark, Work
from modeling.models import Prediction, Run
from tests.factories import QAItemFactory, UserFactory, WorkFactory

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
SECRET_RUN = "Secret-Run-Name-42"
SECRET_MODEL = "secret-model-xyz"
SECRET_DEFECT = "JUDGE-SAYS-MISREADS-THE-LETTER"
SECRET_BONUS = "BONUS-POINT-HIDDEN-FROM-EXPERTS"


def make_generative_run(name: str, items, *, answers: list[str] | None = None) -> Run:
    run = Run.objects.create(
        name=name,
        benchmark=Benchmark.CHARTOM_QA,
        method="generative",
        model=SECRET_MODEL,
        imported=True,
        status=Run.Status.SUCCEEDED,
    )
    for i, item in enumerate(items):
        Prediction.objects.create(
            run=run,
            qa_item=item,
            parse_status="ok",
            raw_output=answers[i] if answers else f"Answer {i}: he is pleased with himself.",
            model=SECRET_MODEL,
            details={
                "task": "generative",
                "bonus_points_total": 2,
                "bonus_points_included": [0],
                "defects": [SECRET_DEFECT],
            },
        )
    return run


@pytest.fixture
def items():
    book = WorkFactory(benchmark=Benchmark.CHARTOM_QA, kind=Work.Kind.BOOK, key="goriot")
    return [
        QAItemFactory(
            work=book,
            question=f"Why does Vautrin pour the wine first, case {i}?",
            answer=f"He wants Eugene on his side, case {i}.",
            context_0="Vautrin filled the glasses of his two neighbours first.",
            context_1000="A longer plot window around the dinner scene.",
            context_2000=None,
            bonus_points=[SECRET_BONUS],
        )
        for i in range(6)
    ]


@pytest.fixture
def runs(items) -> list[Run]:
    return [make_generative_run(SECRET_RUN, items), make_generative_run("other run", items[:3])]


@pytest.fixture
def expert2(db):
    return UserFactory(username="expert2", role="annotator")


def sample_predictions(sample: JudgementSample) -> list[int]:
    return list(sample.tasks.order_by("position").values_list("prediction_id", flat=True))


# --- sampling --------------------------------------------------------------------------


def test_sample_is_seeded_reproducible_and_idempotent(runs, researcher):
    ids = [r.pk for r in runs]
    sample = judgement.judgement_sample_create(
        name="pilot", run_ids=ids, size=5, seed=3, k=2, created_by=researcher
    )
    chosen = sample_predictions(sample)
    assert len(chosen) == 5 and len(set(chosen)) == 5
    assert set(Prediction.objects.filter(pk__in=chosen).values_list("run_id", flat=True)) <= set(
        ids
    )
    assert all(t.k == 2 and t.kind == "judgement" for t in sample.tasks.all())
    # The same name and settings: the same sample, nothing created.
    again = judgement.judgement_sample_create(name="pilot", run_ids=ids[::-1], size=5, seed=3, k=2)
    assert again.pk == sample.pk and sample.tasks.count() == 5
    # The same settings under another name: the same answers in the same order.
    twin = judgement.judgement_sample_create(name="twin", run_ids=ids, size=5, seed=3, k=2)
    assert sample_predictions(twin) == chosen
    with pytest.raises(WorkflowError, match="name: a sample named 'pilot' exists"):
        judgement.judgement_sample_create(name="pilot", run_ids=ids, size=6, seed=3, k=2)


def test_size_above_the_answers_takes_them_all(runs):
    sample = judgement.judgement_sample_create(name="all", run_ids=[runs[1].pk], size=50)
    assert sample.tasks.count() == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": " "}, "name: required"),
        ({"size": 0}, "size:"),
        ({"k": 0}, "k:"),
        ({"seed": -2}, "seed:"),
        ({"run_ids": []}, "runs: choose"),
        ({"run_ids": [999999]}, "runs: no CharToM-QA run 999999"),
    ],
)
def test_bad_sample_settings_name_the_field_and_write_nothing(runs, kwargs, message):
    settings = {"name": "s", "run_ids": [runs[0].pk], "size": 3, "seed": 0, "k": 2, **kwargs}
    with pytest.raises(WorkflowError, match=message):
        judgement.judgement_sample_create(**settings)
    assert not JudgementSample.objects.exists() and not AnnotationTask.objects.exists()


def test_multiple_choice_runs_have_nothing_to_judge(items):
    mc = Run.objects.create(name="mc", benchmark="chartom-qa", method="multichoice", model="m")
    Prediction.objects.create(
        run=mc,
        qa_item=items[0],
        parse_status="ok",
        parsed_answer="a",
        details={"task": "multichoice"},
    )
    with pytest.raises(WorkflowError, match="no generative answer"):
        judgement.judgement_sample_create(name="mc", run_ids=[mc.pk], size=3)


# --- scoring ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["0.35", "1.1", "-0.1", "abc", "", "nan", None])
def test_scores_outside_0_to_1_in_tenths_are_refused(runs, annotator, bad):
    sample = judgement.judgement_sample_create(name="s", run_ids=[runs[0].pk], size=2)
    slot = judgement.judgement_take(annotator=annotator, sample=sample)
    with pytest.raises(WorkflowError, match="score:"):
        judgement.judgement_submit(assignment_id=slot.pk, annotator=annotator, score=bad)
    slot.refresh_from_db()
    assert slot.submitted_at is None


def test_submit_stores_score_and_comment_once(runs, annotator, expert2):
    sample = judgement.judgement_sample_create(name="s", run_ids=[runs[0].pk], size=2, k=2)
    slot = judgement.judgement_take(annotator=annotator, sample=sample)
    other = judgement.judgement_take(annotator=expert2, sample=sample)
    assert other.task_id == slot.task_id and other.pk != slot.pk
    judgement.judgement_submit(
        assignment_id=slot.pk, annotator=annotator, score=0.7, comment="  misses the scheme "
    )
    slot.refresh_from_db()
    assert slot.answer == {"score": 0.7, "comment": "misses the scheme"}
    with pytest.raises(WorkflowError, match="already submitted"):
        judgement.judgement_submit(assignment_id=slot.pk, annotator=annotator, score=0.1)
    with pytest.raises(WorkflowError, match="no such task"):
        judgement.judgement_submit(assignment_id=slot.pk, annotator=expert2, score=0.1)
    judgement.judgement_submit(assignment_id=other.pk, annotator=expert2, score=1.0)
    assert judgement.judgement_scores() == {slot.task.prediction_id: [0.7, 1.0]}
    assert judgement.judgement_scores(run_ids=[runs[1].pk]) == {}
    with pytest.raises(WorkflowError, match="comment: at most"):
        judgement.judgement_submit(
            assignment_id=judgement.judgement_take(annotator=annotator, sample=sample).pk,
            annotator=annotator,
            score=0.5,
            comment="x" * 2001,
        )


# --- the screens -----------------------------------------------------------------------


def test_the_judgement_screen_is_blind(client, runs, annotator):
    sample = judgement.judgement_sample_create(name="blind", run_ids=[runs[0].pk], size=3)
    client.force_login(annotator)
    response = client.post(reverse("annotation:chartom-judgement-take", args=[sample.pk]))
    slot = TaskAssignment.objects.get(annotator=annotator)
    assert response.url == reverse("annotation:chartom-judgement", args=[slot.pk])
    html = client.get(response.url).content.decode()
    prediction = Prediction.objects.select_related("qa_item").get(pk=slot.task.prediction_id)
    item = prediction.qa_item
    for shown in (item.question, item.answer, item.context_0, prediction.raw_output):
        assert shown in html
    assert "Longer plot (about 1,000 tokens)" in html and item.context_1000 in html
    assert "2,000 tokens" not in html  # no 2k window on this item
    for hidden in (SECRET_RUN, SECRET_MODEL, SECRET_DEFECT, SECRET_BONUS, "bonus_points"):
        assert hidden not in html
    assert 'name="score" value="1.0"' in html and 'name="score" value="0.0"' in html


def test_expert_scores_through_the_views(client, runs, annotator):
    sample = judgement.judgement_sample_create(name="v", run_ids=[runs[0].pk], size=2)
    client.force_login(annotator)
    client.post(reverse("annotation:chartom-judgement-take", args=[sample.pk]))
    slot = TaskAssignment.objects.get(annotator=annotator)
    submit = reverse("annotation:chartom-judgement-submit", args=[slot.pk])
    refused = client.post(submit, {"score": "0.45"}, **HX)
    assert refused.status_code == 422 and b"score: from 0 to 1.0 in steps of 0.1" in refused.content
    page = client.post(submit, {"score": "2", "comment": "kept"})
    assert page.status_code == 422 and b"kept" in page.content  # the comment is not lost
    done = client.post(submit, {"score": "0.8", "comment": "close"}, **HX)
    nxt = TaskAssignment.objects.filter(annotator=annotator).exclude(pk=slot.pk).get()
    assert done["HX-Redirect"] == reverse("annotation:chartom-judgement", args=[nxt.pk])
    slot.refresh_from_db()
    assert slot.answer == {"score": 0.8, "comment": "close"}
    replay = client.post(submit, {"score": "0.2"}, follow=True)
    assert b"already scored (0.8); nothing changed" in replay.content
    client.post(reverse("annotation:chartom-judgement-submit", args=[nxt.pk]), {"score": "1.0"})
    last = client.post(reverse("annotation:chartom-judgement-take", args=[sample.pk]), follow=True)
    assert b"No answer of &#x27;v&#x27; left for you to score" in last.content


def test_roles_raters_403_annotators_cannot_create_samples(client, runs, rater, annotator):
    sample = judgement.judgement_sample_create(name="r", run_ids=[runs[0].pk], size=1)
    slot = judgement.judgement_take(annotator=annotator, sample=sample)
    client.force_login(rater)
    for url in (
        reverse("annotation:chartom-checks"),
        reverse("annotation:chartom-judgement", args=[slot.pk]),
    ):
        assert client.get(url).status_code == 403
    client.force_login(annotator)
    created = client.post(
        reverse("annotation:chartom-judgement-sample-create"),
        {
            "judgement-name": "mine",
            "judgement-runs": [runs[0].pk],
            "judgement-size": 2,
            "judgement-seed": 0,
            "judgement-k": 2,
        },
    )
    assert created.status_code == 403
    assert not JudgementSample.objects.filter(name="mine").exists()


def test_researcher_creates_a_sample_through_the_form(client, runs, researcher):
    client.force_login(researcher)
    page = client.get(reverse("annotation:chartom-checks")).content.decode()
    assert f"#{runs[0].pk} {SECRET_RUN} (6 answers)" in page  # the researcher picks runs
    url = reverse("annotation:chartom-judgement-sample-create")
    response = client.post(
        url,
        {
            "judgement-name": "table 7",
            "judgement-runs": [runs[0].pk, runs[1].pk],
            "judgement-size": 20,
            "judgement-seed": 1,
            "judgement-k": 2,
        },
        follow=True,
    )
    assert b"Only 9 answer(s) to judge in these runs: all are sampled." in response.content
    assert JudgementSample.objects.get(name="table 7").tasks.count() == 9
    bad = client.post(url, {"judgement-name": "x", "judgement-size": 2, "judgement-seed": 0})
    assert bad.status_code == 400 and b"Runs" in bad.content


def test_another_experts_slot_is_not_found(client, runs, annotator, expert2):
    sample = judgement.judgement_sample_create(name="o", run_ids=[runs[0].pk], size=1)
    slot = judgement.judgement_take(annotator=annotator, sample=sample)
    client.force_login(expert2)
    assert client.get(reverse("annotation:chartom-judgement", args=[slot.pk])).status_code == 404
    submit = reverse("annotation:chartom-judgement-submit", args=[slot.pk])
    assert client.post(submit, {"score": "0.5"}).status_code == 404


def test_anonymous_visitors_are_sent_to_log_in(client, runs, annotator):
    sample = judgement.judgement_sample_create(name="anon", run_ids=[runs[0].pk], size=1)
    slot = judgement.judgement_take(annotator=annotator, sample=sample)
    for url in (
        reverse("annotation:chartom-checks"),
        reverse("annotation:chartom-judgement", args=[slot.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response.url
    submit = reverse("annotation:chartom-judgement-submit", args=[slot.pk])
    assert client.post(submit, {"score": "0.5"}).status_code == 302
    slot.refresh_from_db()
    assert slot.submitted_at is None
