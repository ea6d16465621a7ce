"""LLM steps of CharToM-QA construction against the loopback server, and their readers."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import pytest
from django.db import transaction

from annotation.chartom.llm_steps import (
    candidate_count,
    construction_claim,
    construction_step_run,
)
from annotation.chartom.models import LLM_STAGES, Stage
from annotation.chartom.prompts import chartom_template, chartom_templates_ensure_defaults
from annotation.chartom.publish import construction_publish
from annotation.chartom.replies import (
    ReplyInvalid,
    bonus_points_reply,
    description_reply,
    distractors_reply,
    filter_reply,
    question_reply,
    verification_reply,
)
from annotation.chartom.tasks import chartom_step_task
from annotation.chartom.workflow import (
    STAGE_ORDER,
    STEP_TASK_NAME,
    construction_advance,
    construction_lock,
    construction_retry,
    field_set,
)
from annotation.models import AnnotationTask, Construction, FieldChange, NoteBatch
from benchmarks.models import QAItem
from modeling.models import RunCall
from modeling.runs.leases import LeaseHeld

# --- reply readers (table-driven) ----------------------------------------------------------

FILTER_OK = [
    ("Yes\nVautrin wants Eugene on his side.", ("yes", "Vautrin wants Eugene on his side.")),
    ("Yes.\n\n\nVautrin wants Eugene on his side.", ("yes", "Vautrin wants Eugene on his side.")),
    (
        "**Yes**\n**Intention of Vautrin:** to win Eugene over.",
        ("yes", "Intention of Vautrin:** to win Eugene over."),
    ),
    ('"Yes"\n"Vautrin means to win Eugene over."', ("yes", "Vautrin means to win Eugene over.")),
    ("Answer: No\nReason: the note is about the reader.", ("no", "the note is about the reader.")),
    (
        "[Answer]: no - the note judges the book, not Goriot.",
        ("no", "the note judges the book, not Goriot."),
    ),
    (
        "1. Yes\n2. Goriot longs to see his daughters.",
        ("yes", "Goriot longs to see his daughters."),
    ),
    ("NO, the note only retells the plot", ("no", "the note only retells the plot")),
    ("Yes: Goriot longs\nto see his daughters.", ("yes", "Goriot longs to see his daughters.")),
]
FILTER_OK.append(
    (
        "**Answer:** Yes\n**Intention of Vautrin:** he wants Eugene.",
        ("yes", "Intention of Vautrin: he wants Eugene."),
    )
)
FILTER_BAD = [
    "",
    "   \n\n",
    "Yes / No\nsomething",
    "Maybe, it is hard to say.",
    "Not sure.",
    "Yes",
    "I'm sorry, but I can't help with that.",
    "Nothing in the note says so.",
]


@pytest.mark.parametrize(("reply", "expected"), FILTER_OK)
def test_filter_reply_reads(reply: str, expected: tuple[str, str]) -> None:
    verdict, reason = filter_reply(reply)
    assert verdict == expected[0]
    assert (
        reason.replace("**", "").replace("Intention of Vautrin: ", "Intention of Vautrin:** ")
        == expected[1]
        or reason == expected[1]
    )


@pytest.mark.parametrize("reply", FILTER_BAD)
def test_filter_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        filter_reply(reply)


VERIFY_OK = [
    (
        "Appropriate\nThe description answers it directly.",
        (True, "The description answers it directly."),
    ),
    ("Inappropriate\nToo broad.", (False, "Too broad.")),
    (
        "**Inappropriate.** The question asks about the wine.",
        (False, "The question asks about the wine."),
    ),
    ('"Appropriate"\n"Reason: it fits."', (True, "it fits.")),
    ("Verdict: Not appropriate\n\nIt is too broad.", (False, "It is too broad.")),
    ("appropriate", (True, "")),
]
VERIFY_BAD = ["", "Appropriate / Inappropriate\nx", "Suitable.", "It is appropriate."]


@pytest.mark.parametrize(("reply", "expected"), VERIFY_OK)
def test_verification_reply_reads(reply: str, expected: tuple[bool, str]) -> None:
    assert verification_reply(reply) == expected


@pytest.mark.parametrize("reply", VERIFY_BAD)
def test_verification_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        verification_reply(reply)


DESCRIPTION_OK = [
    (
        "Vautrin flatters them so that his plan goes ahead.",
        "Vautrin flatters them so that his plan goes ahead.",
    ),
    (
        '"Vautrin flatters them so that his plan goes ahead."\n\n',
        "Vautrin flatters them so that his plan goes ahead.",
    ),
    (
        "The ToM description about the intention of Vautrin is:\n**Vautrin flatters them.**",
        "Vautrin flatters them.",
    ),
    ("Description: Goriot longs\nfor his daughters.", "Goriot longs for his daughters."),
]


@pytest.mark.parametrize(("reply", "expected"), DESCRIPTION_OK)
def test_description_reply_reads(reply: str, expected: str) -> None:
    assert description_reply(reply) == expected


@pytest.mark.parametrize("reply", ["", "\n \n", "x" * 2500])
def test_description_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        description_reply(reply)


QUESTION_OK = [
    (
        "Why does Vautrin fill his neighbours' glasses first?",
        "Why does Vautrin fill his neighbours' glasses first?",
    ),
    (
        '"Why does Vautrin fill his neighbours\' glasses first?"',
        "Why does Vautrin fill his neighbours' glasses first?",
    ),
    ("**Question:** Why does Vautrin pour first?", "Why does Vautrin pour first?"),
    (
        "The question you raise that meets the above requirements is:\n\n"
        "What does Goriot long for?",
        "What does Goriot long for?",
    ),
    (
        "Why does Vautrin fill\nhis neighbours' glasses first?",
        "Why does Vautrin fill his neighbours' glasses first?",
    ),
    ("1. What does Goriot long for?", "What does Goriot long for?"),
    ("What does Goriot long for?\n\nThis asks about his desire.", "What does Goriot long for?"),
]
QUESTION_BAD = [
    "",
    "Vautrin wants to win them over.",
    "1. Why does Vautrin pour first?\n2. What does Goriot want?",
    "Here is my thinking.\nWhy does Vautrin pour first?\nHe wants to please them.",
]


@pytest.mark.parametrize(("reply", "expected"), QUESTION_OK)
def test_question_reply_reads(reply: str, expected: str) -> None:
    assert question_reply(reply) == expected


@pytest.mark.parametrize("reply", QUESTION_BAD)
def test_question_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        question_reply(reply)


BONUS_OK = [
    (
        '[Bonus Point]: "Vautrin wants to please them."\n[Bonus Point]: "His plan must go ahead."',
        ["Vautrin wants to please them.", "His plan must go ahead."],
    ),
    (
        "Here are the bonus points:\n\n"
        "[Bonus Point 1]: \u201cVautrin wants to please them.\u201d\n\n"
        "[Bonus Point 2]: \u201cHis plan must go ahead.\u201d\n",
        ["Vautrin wants to please them.", "His plan must go ahead."],
    ),
    ('- **[Bonus Point]:** "Goriot misses his daughters."', ["Goriot misses his daughters."]),
    (
        '1. [Bonus Point]: "One point that goes on\nto the next line."',
        ["One point that goes on to the next line."],
    ),
    ('[Bonus Point]: "Same."\n[Bonus Point]: "same."', ["Same."]),
    ("Bonus Point: Goriot misses his daughters.", ["Goriot misses his daughters."]),
]
BONUS_BAD = [
    "",
    "Goriot misses his daughters.",
    '[Bonus Point]: "One."\n\nAnd another thing he wants.',
    '[Bonus Point]: ""',
]


@pytest.mark.parametrize(("reply", "expected"), BONUS_OK)
def test_bonus_points_reply_reads(reply: str, expected: list[str]) -> None:
    assert bonus_points_reply(reply) == expected


@pytest.mark.parametrize("reply", BONUS_BAD)
def test_bonus_points_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        bonus_points_reply(reply)


THREE = ["He wants to look generous.", "He wants to rule the table.", "He is testing the wine."]
DISTRACTORS_OK = [
    (
        "[Distraction Choice 1]: He wants to look generous.\n[Distraction Choice 2]: He wants to "
        "rule the table.\n[Distraction Choice 3]: He is testing the wine.",
        THREE,
    ),
    (
        "Sure. Here they are:\n\n**[Distraction Choice 1]:** (He wants to look generous.)\n\n"
        "**[Distraction Choice 2]:** (He wants to rule the table.)\n\n"
        "**[Distraction Choice 3]:** (He is testing the wine.)",
        THREE,
    ),
    (
        '[Distraction Choice 3]: "He is testing the wine."\n[Distraction Choice 1]: "He wants to '
        'look generous."\n[Distraction Choice 2]: "He wants to rule the table."',
        [THREE[2], THREE[0], THREE[1]],
    ),
    (
        "Distractor 1: He wants to look generous.\nDistractor 2: He wants to rule\nthe table.\n"
        "Distractor 3: He is testing the wine.",
        THREE,
    ),
]
DISTRACTORS_BAD = [
    "",
    "[Distraction Choice 1]: a\n[Distraction Choice 2]: b",
    "[Distraction Choice 1]: a\n[Distraction Choice 2]: b\n[Distraction Choice 3]: c\n"
    "[Distraction Choice 4]: d",
    "[Distraction Choice 1]: a\n[Distraction Choice 1]: b\n[Distraction Choice 3]: c",
    "[Distraction Choice 1]: a\n[Distraction Choice 2]: A\n[Distraction Choice 3]: c",
    "1. He wants to look generous.\n2. He wants to rule the table.\n3. He is testing the wine.",
]


@pytest.mark.parametrize(("reply", "expected"), DISTRACTORS_OK)
def test_distractors_reply_reads(reply: str, expected: list[str]) -> None:
    assert distractors_reply(reply) == expected


@pytest.mark.parametrize("reply", DISTRACTORS_BAD)
def test_distractors_reply_refuses(reply: str) -> None:
    with pytest.raises(ReplyInvalid):
        distractors_reply(reply)


# --- the steps against the loopback server -------------------------------------------------

pytestmark = pytest.mark.django_db

QUESTIONS = [
    "Why does Vautrin fill his neighbours' glasses before his own?",
    "What is Vautrin after when he serves the others first?",
    "Why does Vautrin fill his neighbours' glasses before his own?",  # a repeat
    "What colour is the wine?",  # judged too trivial
    "How does Vautrin hope to win Eugene over at dinner?",
    "What does Vautrin want from Eugene and Goriot?",
]


class Script:
    """A responder that answers each prompt kind the way a cooperative model would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # the server answers on several threads
        self.question_calls = 0
        self.question_suffix = ""
        self.filter_answers: dict[str, str] = {}
        self.seen: list[str] = []
        self.verify = lambda question: (
            "Inappropriate\nToo trivial." if "colour" in question else "Appropriate\nIt fits."
        )

    def __call__(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if "whether the reader's note below" in prompt:
            self.seen.append("filter")
            for needle, answer in self.filter_answers.items():
                if needle in prompt:
                    return answer
            return "Yes\nThe character's mind is stated plainly in the note."
        if "turn these fragments" in prompt:
            self.seen.append("paraphrase")
            return "**The character acts on purpose to keep the plan alive.**"
        if "ask a question about the" in prompt:
            self.seen.append("question")
            with self.lock:
                question = QUESTIONS[self.question_calls % len(QUESTIONS)]
                self.question_calls += 1
            return f"Question: {question[:-1]}{self.question_suffix}?"
        if "[Candidate Question]:" in prompt:
            self.seen.append("verify")
            question = prompt.split("[Candidate Question]: ", 1)[1].split("\n", 1)[0]
            return self.verify(question)
        if "pick out the key points" in prompt:
            self.seen.append("bonus")
            return '[Bonus Point]: "He acts on purpose."\n[Bonus Point]: "He keeps the plan alive."'
        if "writing wrong choices" in prompt:
            self.seen.append("distractors")
            return (
                "[Distraction Choice 1]: He wants to look generous.\n"
                "[Distraction Choice 2]: He wants to rule the table.\n"
                "[Distraction Choice 3]: He is testing the wine."
            )
        raise AssertionError(f"unexpected prompt: {prompt[:200]}")


@pytest.fixture
def script(llm_server) -> Script:
    responder = Script()
    llm_server.responder = responder
    return responder


@pytest.fixture
def at(make_construction, chartom_backend):
    """A construction of a batch whose LLM is the loopback server."""

    def make(stage: str = "filter", **fields: Any) -> Construction:
        return make_construction(stage=stage, state="queued", backend=chartom_backend, **fields)

    return make


def run_queued() -> list[str]:
    """Run every queued LLM step, as the worker would, until none is left."""
    outcomes = []
    while True:
        queued = list(
            Construction.objects.filter(stage__in=LLM_STAGES, state="queued").values_list(
                "pk", flat=True
            )
        )
        if not queued:
            return outcomes
        for pk in queued:
            outcomes.append(construction_step_run(construction_id=pk))


def batch_run_of(construction: Construction):
    return NoteBatch.objects.get(pk=construction.note.batch_id).run


def human(construction: Construction, user, **fields: Any) -> None:
    """A human stage done the way its screen does it: fields by the annotator, then on."""
    with transaction.atomic():
        locked = construction_lock(construction.pk)
        for name, value in fields.items():
            field_set(locked, name, value, user=user, action="edited")
        if locked.stage == Stage.DISTRACTOR_REVIEW:
            construction_publish(locked, user=user)
        else:
            following = STAGE_ORDER[STAGE_ORDER.index(locked.stage) + 1]
            construction_advance(locked, following, user=user)


def test_full_llm_walk_of_two_notes(at, script, llm_server, django_user_model) -> None:
    user = django_user_model.objects.create_user("annotator")
    script.filter_answers = {
        "[What belief means]": "No\nThe note says nothing about what Vautrin believes.",
    }
    vautrin = at(dimension="intention", note=0)
    dropped = at(dimension="belief", note=0)
    goriot = at(dimension="desire", note=1)

    assert sorted(run_queued()) == ["advanced:dropped", "advanced:extract", "advanced:extract"]
    dropped.refresh_from_db()
    assert (dropped.stage, dropped.state, dropped.filter_verdict) == ("dropped", "done", "no")
    assert "nothing about what Vautrin believes" in dropped.filter_reason

    for construction in (vautrin, goriot):
        construction.refresh_from_db()
        assert construction.filter_verdict == "yes"
        note = construction.note.note_text
        human(construction, user, key_spans=[[0, 20]], key_note=note[:20])
    assert run_queued() == ["advanced:paraphrase_review"] * 2
    for construction in (vautrin, goriot):
        construction.refresh_from_db()
        assert construction.description == "The character acts on purpose to keep the plan alive."
        human(construction, user)
    assert run_queued() == ["advanced:question_choice"] * 2

    for construction in (vautrin, goriot):
        kept = list(construction.candidates.filter(kept=True).order_by("position"))
        assert 1 <= len(kept) <= 4
        assert all(c.verdict == "appropriate" for c in kept)
        assert len({c.text for c in kept}) == len(kept)
        # The same question for both (the samples arrive in any order): the two
        # distractor prompts below are then the same.
        human(construction, user, question=min(c.text for c in kept))
    assert run_queued() == ["advanced:bonus_review"] * 2
    for construction in (vautrin, goriot):
        construction.refresh_from_db()
        assert construction.bonus_points == ["He acts on purpose.", "He keeps the plan alive."]
        human(construction, user)
    assert run_queued() == ["advanced:distractor_review"] * 2
    for construction in (vautrin, goriot):
        construction.refresh_from_db()
        assert len(construction.distractors) == 3
        human(construction, user)

    assert QAItem.objects.count() == 2
    for construction in (vautrin, goriot):
        construction.refresh_from_db()
        assert construction.stage == "published"

    # Provenance: who or which model and template version wrote each field.
    change = FieldChange.objects.get(construction=vautrin, field="description")
    assert (change.model, change.template, change.old_value) == (
        "test-model",
        "chartom-paraphrase v1",
        "",
    )
    assert change.call.raw_output.startswith("**The character")
    assert FieldChange.objects.get(construction=vautrin, field="key_note").changed_by == user
    candidates = FieldChange.objects.get(construction=vautrin, field="candidates")
    assert candidates.template == "chartom-question v1, chartom-verify v1"

    # One run holds every call; the verification of the repeated question was not sent.
    batch = vautrin.note.batch
    batch.refresh_from_db()
    run = batch.run
    assert run.name == "CharToM-QA construction: test batch"
    assert run.status == "succeeded"
    n = candidate_count()
    assert script.seen.count("question") == 2 * n
    assert script.seen.count("verify") == 2 * (n - 1)
    calls = RunCall.objects.filter(run=run)
    # The two distractor prompts are the same (same plot, question and answer): the
    # second came from the response cache and was not sent.
    assert calls.filter(from_cache=False).count() == llm_server.request_count
    assert llm_server.request_count == len(script.seen)
    assert calls.filter(from_cache=True).count() == 1
    assert run.done_calls == calls.count()


def test_the_batch_run_shows_at_runs_with_its_calls(at, script, client, researcher) -> None:
    construction = at()
    construction_step_run(construction_id=construction.pk)
    run = batch_run_of(construction)
    client.force_login(researcher)
    listing = client.get("/runs/")
    assert listing.status_code == 200
    assert "CharToM-QA construction: test batch" in listing.content.decode()
    page = client.get(f"/runs/{run.pk}/")
    assert page.status_code == 200
    call = RunCall.objects.get(run=run)
    assert call.unit_key in page.content.decode()


def test_filter_no_drops_the_construction(at, script) -> None:
    script.filter_answers = {"Vautrin": "No. The note judges the scheme, not Vautrin's mind."}
    construction = at()
    assert construction_step_run(construction_id=construction.pk) == "advanced:dropped"
    construction.refresh_from_db()
    assert (construction.stage, construction.state) == ("dropped", "done")
    assert construction.filter_reason == "The note judges the scheme, not Vautrin's mind."
    assert not AnnotationTask.objects.filter(construction=construction).exists()
    # Done steps are not run again.
    assert construction_step_run(construction_id=construction.pk) == "skipped"


def test_a_server_error_needs_retry_and_the_retry_succeeds(at, script, llm_server) -> None:
    construction = at()
    for _ in range(2):  # the backend's own retry gets the second
        llm_server.enqueue(status=500, headers={"Retry-After": "0"})
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert construction.state == "needs_retry"
    assert "the LLM backend failed" in construction.error and "500" in construction.error

    construction_retry(construction_id=construction.pk)
    construction.refresh_from_db()
    assert (construction.state, construction.error) == ("queued", "")
    assert construction_step_run(construction_id=construction.pk) == "advanced:extract"
    assert llm_server.request_count == 3
    call = RunCall.objects.get(run=batch_run_of(construction))
    assert (call.status, call.sample_index) == ("done", 0)


def test_a_timeout_needs_retry(at, script, llm_server, chartom_backend) -> None:
    chartom_backend.timeout_s = 0.3
    chartom_backend.max_retries = 0
    chartom_backend.save()
    construction = at()
    llm_server.enqueue("Yes\nToo late.", delay=1.5)
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert "the LLM backend failed" in construction.error
    assert "timed out" in construction.error.lower() or "timeout" in construction.error.lower()
    llm_server.wait_idle()
    construction_retry(construction_id=construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "advanced:extract"


def test_an_unreadable_reply_is_asked_again_once_on_retry(at, script, llm_server) -> None:
    construction = at()
    llm_server.enqueue("Perhaps. It is hard to tell.")
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert "could not be read" in construction.error and "Perhaps" in construction.error

    construction_retry(construction_id=construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "advanced:extract"
    # The bad reply was paid once and kept; the retry asked once more under sample 1.
    assert llm_server.request_count == 2
    calls = RunCall.objects.filter(run=batch_run_of(construction)).order_by("sample_index")
    assert [c.sample_index for c in calls] == [0, 1]
    construction.refresh_from_db()
    change = FieldChange.objects.get(construction=construction, field="filter_verdict")
    assert change.call == calls[1]


def test_a_refusal_needs_retry(at, script, llm_server) -> None:
    construction = at()
    llm_server.enqueue("", finish_reason="content_filter")
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert "refused" in construction.error


def test_a_retry_of_the_question_step_pays_for_nothing_twice(
    at, script, llm_server, chartom_backend
) -> None:
    # One call at a time, so the scripted failure hits the fourth sample.
    chartom_backend.max_concurrency = 1
    chartom_backend.save(update_fields=["max_concurrency"])
    construction = at(stage="questions", description="Vautrin flatters them on purpose.")
    for text in QUESTIONS[3:]:
        llm_server.enqueue(text)
    for _ in range(2):
        llm_server.enqueue(status=500, headers={"Retry-After": "0"})
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    # The samples after the failed one were still asked; every reply that came back
    # is a candidate already.
    n = candidate_count()
    assert sorted(construction.candidates.values_list("position", flat=True)) == [
        p for p in range(n) if p != 3
    ]

    construction_retry(construction_id=construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "advanced:question_choice"
    assert construction.candidates.count() == n
    assert script.question_calls == n - 3
    paid = RunCall.objects.filter(run=batch_run_of(construction), status="done")
    assert paid.count() == n + (n - 1)  # every sample once, one verification per distinct


def test_the_question_step_sends_its_samples_and_verifications_side_by_side(
    at, script, llm_server, chartom_backend
) -> None:
    """Issue 31: the candidate samples go out together inside the backend's window, and
    then the verifications of the distinct ones; a step at max_concurrency 1 keeps the
    same candidates, verdicts and paid calls."""
    import time

    from modeling.models import CachedResponse

    lock = threading.Lock()

    def slowly(body: dict[str, Any]) -> str:
        with lock:  # the script counts its question replies
            reply = script(body)
        time.sleep(0.05)  # long enough for calls sent together to meet at the server
        return reply

    def question_step(concurrency: int, dimension: str) -> tuple[list, int, int]:
        chartom_backend.max_concurrency = concurrency
        chartom_backend.save(update_fields=["max_concurrency"])
        script.question_calls, script.seen = 0, []
        CachedResponse.objects.all().delete()  # each step asks the server itself
        llm_server.reset()
        llm_server.responder = slowly
        construction = at(
            stage="questions", dimension=dimension, description="Vautrin flatters them on purpose."
        )
        assert construction_step_run(construction_id=construction.pk) == "advanced:question_choice"
        outcome = sorted(
            (c.text, c.verdict, c.kept, c.verdict_reason.startswith("same question"))
            for c in construction.candidates.all()
        )
        return outcome, script.seen.count("verify"), llm_server.max_in_flight

    together, verified, peak = question_step(8, "intention")
    assert peak > 1
    one_at_a_time, verified_alone, peak_alone = question_step(1, "desire")
    assert peak_alone == 1
    assert together == one_at_a_time
    assert verified == verified_alone == candidate_count() - 1


def test_no_candidate_passing_verification_needs_retry_and_samples_anew(at, script) -> None:
    construction = at(stage="questions", description="Vautrin flatters them on purpose.")
    script.verify = lambda question: "Inappropriate\nToo broad."
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert "no candidate passed verification" in construction.error
    n = candidate_count()
    assert sorted(construction.candidates.values_list("position", flat=True)) == list(range(n))

    script.verify = lambda question: "Appropriate\nFine."
    script.question_suffix = ", this time"
    construction_retry(construction_id=construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "advanced:question_choice"
    positions = sorted(construction.candidates.values_list("position", flat=True))
    assert positions == list(range(2 * n))
    kept = construction.candidates.filter(kept=True).order_by("position")
    assert [c.position for c in kept][:1] == [n] and kept.count() <= 4


def test_budget_exhaustion_needs_retry_without_a_call(at, script, llm_server) -> None:
    construction = at()
    batch = construction.note.batch
    batch.budget_tokens = 1
    batch.save()
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert construction.error.startswith("filter: budget:")
    assert llm_server.request_count == 0


def test_a_batch_without_backend_needs_retry(make_construction) -> None:
    construction = make_construction()
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    construction.refresh_from_db()
    assert "has no LLM backend" in construction.error


def test_an_edited_template_is_used_and_named_in_provenance(at, script) -> None:
    from modeling.runs.prompt_templates import prompt_template_revise

    template = chartom_template("chartom-filter")
    prompt_template_revise(template=template, user=template.user + "\nBe brief.")
    construction = at()
    assert construction_step_run(construction_id=construction.pk) == "advanced:extract"
    change = FieldChange.objects.get(construction=construction, field="filter_reason")
    assert change.template == "chartom-filter v2"


def test_misleadings_reach_the_distractor_prompt(at, script, llm_server) -> None:
    construction = at(
        stage="distractors",
        question="Why does Vautrin pour first?",
        description="He flatters them.",
        misleadings=["The answer claims he is generous.", {"text": "It says he tests the wine."}],
    )
    assert construction_step_run(construction_id=construction.pk) == "advanced:distractor_review"
    prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert (
        "[Misleadings]: - The answer claims he is generous.\n- It says he tests the wine." in prompt
    )
    other = at(stage="distractors", note=1, question="q?", description="d")
    construction_step_run(construction_id=other.pk)
    assert "[Misleadings]: None" in llm_server.requests[-1]["messages"][-1]["content"]


def test_the_celery_task_runs_the_step(at, script) -> None:
    from config.celery import app

    assert STEP_TASK_NAME in app.tasks and chartom_step_task.name == STEP_TASK_NAME
    construction = at()
    assert chartom_step_task.apply(args=(construction.pk,)).get() == "advanced:extract"
    assert chartom_step_task.apply(args=(construction.pk,)).get() == "skipped"


def test_two_claims_of_one_step_give_it_to_one_worker(at) -> None:
    construction = at()
    assert construction_claim(construction.pk) is True
    # The holder (this process) is alive: the second claim is refused, by name.
    with pytest.raises(LeaseHeld, match=f"running in process {os.getpid()} on this host"):
        construction_claim(construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "skipped"


def test_default_templates_are_ours_and_idempotent() -> None:
    assert chartom_templates_ensure_defaults() == 6
    assert chartom_templates_ensure_defaults() == 0
    for name in ("chartom-filter", "chartom-verify"):
        assert chartom_template(name).version == 1
    assert "Yes / No" in chartom_template("chartom-filter").user
    assert "[Bonus Point]:" in chartom_template("chartom-bonus").user


# --- a real worker ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_queued_steps(book, chartom_backend, llm_server, tmp_path) -> None:
    """Notes imported with queueing on; a Celery worker process filters and paraphrases."""
    import time

    from annotation.chartom.notes_import import note_batch_import
    from tests.celery_worker import purge_queues, start_worker, stop_worker

    from .conftest import BOOK_TEXT, SAMPLE_NOTES

    script = Script()
    script.filter_answers = {
        "[What belief means]": "No\nNothing about belief.",
        "[What emotion means]": "No\nNothing about emotion.",
        "[What desire means]": "No\nNothing about desire.",
    }
    llm_server.responder = script
    character, underlined, note = SAMPLE_NOTES[0]
    path = tmp_path / "one.jsonl"
    path.write_text(
        json.dumps(
            {
                "book": "Father Goriot",
                "character": character,
                "underlined": underlined,
                "context": BOOK_TEXT,
                "note": note,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    purge_queues()
    log = tmp_path / "worker.log"
    worker = start_worker(log, name="chartom")

    def wait_for(condition) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"the worker did not get there\n{log.read_text()[-3000:]}")

    try:
        batch = note_batch_import(path=path, backend=chartom_backend)
        constructions = Construction.objects.filter(note__batch=batch)
        wait_for(lambda: not constructions.filter(stage="filter").exists())
        assert sorted(constructions.values_list("dimension", "stage")) == [
            ("belief", "dropped"),
            ("desire", "dropped"),
            ("emotion", "dropped"),
            ("intention", "extract"),
        ]
        intention = constructions.get(dimension="intention")
        human(intention, None, key_note="buttering them up on purpose")
        wait_for(lambda: constructions.filter(stage="paraphrase_review").exists())
    finally:
        stop_worker(worker)
    intention.refresh_from_db()
    assert intention.description.startswith("The character acts on purpose")
    run = NoteBatch.objects.get(pk=batch.pk).run
    assert run.done_calls == 5 == llm_server.request_count


def test_unreadable_verifications_are_asked_again_on_retry(at, script, llm_server) -> None:
    construction = at(stage="questions", description="Vautrin flatters them on purpose.")
    script.verify = lambda question: "Hmm."
    assert construction_step_run(construction_id=construction.pk) == "needs_retry"
    verdicts = set(construction.candidates.values_list("verdict", flat=True))
    assert verdicts == {"unparseable"}
    assert "verification: the reply does not start with" in (
        construction.candidates.first().verdict_reason
    )
    sent = llm_server.request_count

    script.verify = lambda question: "Appropriate\nFine."
    construction_retry(construction_id=construction.pk)
    assert construction_step_run(construction_id=construction.pk) == "advanced:question_choice"
    # The new round's questions are the old ones: each distinct one is verified again
    # under the next sample index, since its first verification could not be read.
    n = candidate_count()
    assert llm_server.request_count - sent == n + (n - 1)
    kept = construction.candidates.filter(kept=True).order_by("position")
    assert kept.count() == 4 and kept[0].verification_call.sample_index == 1
