"""RougeL (hand-computed LCS), BERTScore with a tiny model built here, and the scoring
service, task routing and command over stored generative CharToM-QA predictions."""

from __future__ import annotations

import math

import pytest
from django.core.management import CommandError, call_command

from common.models import QueuedJob
from common.queueing import HEADER
from metrics.text_overlap import rouge_l
from modeling.models import Prediction, Run
from modeling.pipelines.chartom_qa.text_similarity import (
    bertscore,
    bertscore_f1,
    predictions_text_similarity,
)
from tests.factories import QAItemFactory
from tests.modeling.conftest import TINY_BERT_SENTENCES

SENTENCES = TINY_BERT_SENTENCES


# --- RougeL -----------------------------------------------------------------------------


def test_rouge_l_is_the_lcs_f_measure():
    # reference 6 tokens, candidate 6, LCS "the cat on mat" = 4: P = R = F = 4/6.
    assert rouge_l("the cat sat on the mat", "the cat lay on a mat") == pytest.approx(4 / 6)
    # reference 4 tokens, candidate 2, LCS 2: P = 1, R = 1/2, F = 2/3.
    assert rouge_l("Goriot misses his daughters", "misses daughters") == pytest.approx(2 / 3)
    # Order matters (a subsequence, not a bag): LCS of "a b c" and "c b a" is 1.
    assert rouge_l("a b c", "c b a") == pytest.approx(1 / 3)


def test_rouge_l_ignores_case_and_punctuation_and_scores_empty_answers_zero():
    assert rouge_l("He is LYING, plainly.", "he is lying plainly") == 1.0
    assert rouge_l("the reference", "") == 0.0
    assert rouge_l("", "an answer") == 0.0


# --- BERTScore --------------------------------------------------------------------------


def test_bertscore_of_identical_texts_is_one_and_scores_lie_in_range(tiny_bert):
    pairs = [
        (SENTENCES[0], SENTENCES[0]),
        (SENTENCES[1], SENTENCES[2]),
        (SENTENCES[2], "the letter"),
        (SENTENCES[3], ""),
    ]
    scores = bertscore(pairs, model_path=str(tiny_bert))
    precision, recall, f1 = scores[0]
    assert precision == pytest.approx(1.0, abs=1e-5) and recall == pytest.approx(1.0, abs=1e-5)
    assert f1 == pytest.approx(1.0, abs=1e-5)
    for p, r, f in scores[1:3]:
        assert -1.0 <= p <= 1.0 + 1e-6 and -1.0 <= r <= 1.0 + 1e-6
        assert math.isclose(f, 2 * p * r / (p + r), rel_tol=1e-6)
    assert scores[3] == (0.0, 0.0, 0.0)  # an empty answer has no token to match
    # A shorter candidate made of reference tokens matches itself: precision is highest.
    p, r, _ = scores[2]
    assert p >= r
    assert bertscore_f1(pairs, model_path=str(tiny_bert), num_layers=1)[0] == pytest.approx(
        1.0, abs=1e-5
    )


def test_bertscore_refuses_a_missing_model_or_layer(tiny_bert, tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        bertscore_f1([("a", "b")], model_path=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="num_layers"):
        bertscore_f1([("a", "b")], model_path=str(tiny_bert), num_layers=3)


# --- stored predictions -----------------------------------------------------------------


def _generative_run(name: str, **kwargs) -> Run:
    return Run.objects.create(
        name=name, benchmark="chartom-qa", method="generative", model="m", imported=True, **kwargs
    )


@pytest.fixture
def scored_setup(db):
    item = QAItemFactory(answer="She believes the letter has already been read.")
    other = QAItemFactory(answer="Goriot misses his daughters.")
    run = _generative_run("gen")
    same = Prediction.objects.create(
        run=run,
        qa_item=item,
        parse_status="ok",
        raw_output="She believes the letter has already been read.",
        details={"task": "generative", "bonus_points_total": 1, "bonus_points_included": [0]},
    )
    # No "task" in details: generative by the run's method.
    untagged = Prediction.objects.create(
        run=run, qa_item=other, parse_status="ok", raw_output="He misses them."
    )
    mc_run = Run.objects.create(name="mc", benchmark="chartom-qa", method="multichoice", model="m")
    choice = Prediction.objects.create(
        run=mc_run,
        qa_item=item,
        parse_status="ok",
        parsed_answer="a",
        details={"task": "multichoice"},
    )
    return run, mc_run, same, untagged, choice


def test_scoring_stores_rouge_l_and_bertscore_in_details(scored_setup, tiny_bert, settings):
    run, mc_run, same, untagged, choice = scored_setup
    settings.TOMLAB_BERTSCORE_MODEL = str(tiny_bert)
    assert predictions_text_similarity(run_ids=[run.pk, mc_run.pk]) == 2
    same.refresh_from_db()
    untagged.refresh_from_db()
    choice.refresh_from_db()
    assert same.details["rouge_l"] == 1.0
    assert same.details["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)
    assert same.details["bertscore_model"] == tiny_bert.name
    assert same.details["bonus_points_total"] == 1  # the judge's details are kept
    # "Goriot misses his daughters" vs "He misses them": LCS 1 (misses), P 1/3, R 1/4.
    assert untagged.details["rouge_l"] == pytest.approx(2 * (1 / 3) * (1 / 4) / (1 / 3 + 1 / 4))
    assert "rouge_l" not in choice.details  # multiple-choice picks are not texts to score
    # A second run writes the same numbers again.
    assert predictions_text_similarity(run_ids=[run.pk]) == 2
    same.refresh_from_db()
    assert same.details["rouge_l"] == 1.0


def test_without_a_model_only_rouge_l_is_stored(scored_setup, settings):
    run, *_ = scored_setup
    settings.TOMLAB_BERTSCORE_MODEL = ""
    predictions_text_similarity(run_ids=[run.pk])
    details = Prediction.objects.filter(run=run).values_list("details", flat=True)
    assert all("rouge_l" in d and "bertscore_f1" not in d for d in details)


def test_an_id_that_is_no_chartom_run_writes_nothing(scored_setup):
    run, *_ = scored_setup
    dyntom = Run.objects.create(name="d", benchmark="dyntom", method="vanilla", model="m")
    with pytest.raises(ValueError, match=f"no CharToM-QA run with id {dyntom.pk}"):
        predictions_text_similarity(run_ids=[run.pk, dyntom.pk])
    assert not Prediction.objects.filter(details__has_key="rouge_l").exists()


def test_the_task_goes_to_the_gpu_queue_and_calls_the_service(
    scored_setup, settings, monkeypatch, django_capture_on_commit_callbacks
):
    from modeling.pipelines.chartom_qa.tasks import score_text_similarity_task
    from modeling.pipelines.chartom_qa.text_similarity import text_similarity_enqueue

    sent = []
    monkeypatch.setattr(
        score_text_similarity_task, "apply_async", lambda args, **kw: sent.append((args, kw))
    )
    with django_capture_on_commit_callbacks(execute=True):
        text_similarity_enqueue(run_ids=[3, 1, 3])
    ((args, options),) = sent
    assert args == ([1, 3],) and options["queue"] == "gpu"
    assert QueuedJob.objects.get(pk=options["headers"][HEADER]).args == [[1, 3]]
    monkeypatch.undo()
    run, *_ = scored_setup
    settings.TOMLAB_BERTSCORE_MODEL = ""
    assert score_text_similarity_task.apply(args=([run.pk],)).get() == 2


def test_command_scores_runs_and_names_bad_ids(scored_setup, settings, capsys):
    run, *_ = scored_setup
    settings.TOMLAB_BERTSCORE_MODEL = ""
    call_command("score_text_similarity", "--run", str(run.pk))
    assert "scored 2 generative prediction(s): RougeL; BERTScore not computed" in (
        capsys.readouterr().out
    )
    with pytest.raises(CommandError, match="no CharToM-QA run with id 999999"):
        call_command("score_text_similarity", "--run", "999999")
