"""Reports at scale: synthetic responses and predictions, then report timings (a script).

``generate`` fills a PostgreSQL database with (defaults as issue 17 asks):

- ``--predictions`` DynToM predictions (1,000,000) over ``--runs`` runs (20), on the
  questions of synthetic DynToM stages built and imported the way
  ``bench_dyntom_import.py`` builds them (about 72 questions per stage, so 50,000
  questions a run take ~700 stages); each run answers every question once, right with
  its own probability (0.35-0.85), in one finished, imported run per model
  (``--predictions 0``: no runs at all);
- ``--guesses`` human speaker guesses (100,000) from ``--raters`` raters (500) in one
  closed TVShowGuess study over the Friends copies the load check imports, each rater
  answering whole scenes (submitted, scored) until the total is reached (the Friends
  copies are imported first if the database has no TVShowGuess work);
- ``--validation-stages`` DynToM stages (1,000) validated by ``--annotators``
  annotators (4): 13 objects a stage, every criterion scored, a decision per object
  (issue 31's scale for ``/reports/validation/``);
- ``--chartom-predictions`` CharToM-QA predictions (100,000) over ``--chartom-runs``
  runs (10) on as many synthetic CharToM-QA items as one run answers (10,000 over ten
  synthetic novels, every dimension, direct and indirect): half the runs generative,
  with imported judge verdicts (bonus points covered out of 2-5, defects), half
  multiple choice (a letter, right with the run's own probability), across the three
  context lengths.

``measure`` times what a researcher opens, through Django's test client as a logged-in
researcher (production settings, the same views and cache the server uses), after one
untimed request that imports what a server worker imports once: the report pages and
the API report of DynToM, TVShowGuess and CharToM-QA and the validation report (first
request and a repeat; the API once the page has built the report, whose cache it
shares, and on its own first build; seconds to the millisecond), and the streamed exports (tidy
CSV, long JSON), with the process's peak memory growth while each export streams
(tracemalloc), so a whole-table list would show.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_report_scale.py generate
    DATABASE_URL=… .venv/bin/python tests/benchmarks/bench_report_scale.py measure

Generated rows are marked (runs named ``scale run N``, the study ``scale study``) and
replaced by the next ``generate``. SQLite is refused.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_PREFIX = "scale run "
CHARTOM_RUN_PREFIX = "scale chartom run "
CHARTOM_WORK_PREFIX = "scale-chartom-"
STUDY_NAME = "scale study"
BATCH = 10_000


def _setup() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL=postgres://… (the scale check needs PostgreSQL)")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,127.0.0.1,localhost")
    sys.path.insert(0, str(ROOT))
    from tests.benchmarks.bench_study_load import ensure_database

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# -- generate -----------------------------------------------------------------------------


def dyntom_questions(needed: int) -> list[int]:
    """Ids of at least ``needed`` DynToM questions, importing synthetic stages if short."""
    from django.conf import settings
    from django.core.management import call_command

    from benchmarks.models import DynToMQuestion
    from tests.benchmarks.bench_dyntom_import import SYNTHETIC_PREFIX, build_trials

    have = DynToMQuestion.objects.filter(stage__work__key__startswith=SYNTHETIC_PREFIX)
    if have.count() < needed:
        data = Path(settings.TOMLAB_SHARED_DATA)
        sources = [data / "dyntom", data / "dyntom-variants"]
        stages = needed // 60 + 20
        with tempfile.TemporaryDirectory(prefix="scale-dyntom-") as tmp:
            build_trials(sources, Path(tmp), stages)
            started = time.perf_counter()
            call_command("import_benchmark", "dyntom", tmp, verbosity=0)
            print(
                f"imported {stages} synthetic DynToM stages"
                f" in {time.perf_counter() - started:.0f} s"
            )
    ids = list(have.order_by("pk").values_list("pk", flat=True)[:needed])
    if len(ids) < needed:
        raise SystemExit(f"only {len(ids)} DynToM questions; raise the stage count")
    return ids


def generate_predictions(total: int, runs: int, rng: random.Random) -> None:
    from django.db import connection

    from benchmarks.models import DynToMQuestion
    from modeling.models import Prediction, Run
    from modeling.runs.signals import predictions_changed

    Run.objects.filter(name__startswith=RUN_PREFIX).delete()
    if total <= 0:
        return  # a human-only data set (--predictions 0): no empty runs either
    per_run = total // runs
    questions = dyntom_questions(per_run)
    gold = dict(DynToMQuestion.objects.filter(pk__in=questions).values_list("pk", "gold_letter"))
    started = time.perf_counter()
    for n in range(1, runs + 1):
        run = Run.objects.create(
            name=f"{RUN_PREFIX}{n}",
            benchmark="dyntom",
            method="vanilla",
            model=f"synthetic-model-{n}",
            imported=True,
            status=Run.Status.SUCCEEDED,
        )
        skill = 0.35 + 0.5 * (n - 1) / max(1, runs - 1)
        for i in range(0, per_run, BATCH):
            rows = []
            for qid in questions[i : i + BATCH]:
                right = rng.random() < skill
                answer = gold[qid] if right else rng.choice([x for x in "abcd" if x != gold[qid]])
                rows.append(
                    Prediction(
                        run=run,
                        dyntom_question_id=qid,
                        parsed_answer=answer,
                        parse_status=Prediction.ParseStatus.OK,
                        correct=right,
                        model=run.model,
                    )
                )
            Prediction.objects.bulk_create(rows)
        Run.objects.filter(pk=run.pk).update(
            total_calls=per_run, done_calls=per_run, finished_at=run.created_at
        )
        # As an import does once its predictions are written: the report packs them.
        predictions_changed.send(sender=Prediction, run_ids=[run.pk])
        print(f"  run {n}/{runs}: {per_run:,} predictions ({time.perf_counter() - started:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE modeling_prediction")


def generate_guesses(total: int, raters: int, rng: random.Random) -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from benchmarks.models import SpeakerInstance, Work
    from studies.models import (
        Assignment,
        Guess,
        Participant,
        Study,
        StudyItem,
        StudyWork,
        WorkSession,
    )
    from studies.services import study_create

    Study.objects.filter(name=STUDY_NAME).delete()
    if not Work.objects.filter(benchmark="tvshowguess").exists():
        from tests.benchmarks.bench_study_load import import_works

        with tempfile.TemporaryDirectory(prefix="scale-friends-") as tmp:
            import_works(10, Path(tmp))  # Friends and the load check's 10 copies
    works = list(Work.objects.filter(benchmark="tvshowguess").order_by("pk"))
    with transaction.atomic():
        study = study_create(name=STUDY_NAME, benchmark="tvshowguess", works=works, overlap=raters)
        Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    items = list(StudyItem.objects.filter(study=study).order_by("study_work_id", "position"))
    instances: dict[int, list[SpeakerInstance]] = {}
    for i in SpeakerInstance.objects.filter(
        scene_id__in=[it.scene_id for it in items]
    ).select_related("gold_character"):
        instances.setdefault(i.scene_id, []).append(i)
    study_works = {sw.pk: sw for sw in StudyWork.objects.filter(study=study)}
    per_rater = total // raters
    participants = Participant.objects.bulk_create(
        Participant(
            study=study,
            label=f"scale rater {n}",
            token=secrets.token_urlsafe(32),
            consented_at=timezone.now(),
            consented_version=1,
        )
        for n in range(raters)
    )
    started = time.perf_counter()
    written = 0
    for n, participant in enumerate(participants):
        seen = n % 2 == 0
        sessions = {
            sw: WorkSession(participant=participant, study_work_id=sw, seen=seen, seed=n)
            for sw in study_works
        }
        WorkSession.objects.bulk_create(sessions.values())
        start = rng.randrange(len(items))
        chosen, answers = [], 0
        for k in range(len(items)):
            item = items[(start + k) % len(items)]
            chosen.append(item)
            answers += len(instances[item.scene_id])
            if answers >= per_rater:
                break
        now = timezone.now()
        assignments = Assignment.objects.bulk_create(
            Assignment(
                participant=participant,
                session=sessions[item.study_work_id],
                study_item=item,
                position=k,
                seen=seen,
                status=Assignment.Status.SUBMITTED,
                history_needed=rng.random() < 0.4,
                first_shown_at=now,
                last_event_at=now,
                active_ms=rng.randrange(5_000, 90_000),
                total_ms=rng.randrange(5_000, 120_000),
                submitted_at=now,
            )
            for k, item in enumerate(chosen)
        )
        guesses = []
        for assignment, item in zip(assignments, chosen, strict=True):
            for instance in instances[item.scene_id]:
                right = rng.random() < 0.6
                gold = instance.gold_character.name
                answer = gold if right else rng.choice(instance.candidates)
                guesses.append(
                    Guess(
                        assignment=assignment,
                        instance=instance,
                        answer=answer,
                        correct=answer.casefold() == gold.casefold(),
                        tags=rng.sample(study.tags, k=rng.randint(0, 2)),
                    )
                )
        Guess.objects.bulk_create(guesses, batch_size=BATCH)
        written += len(guesses)
        if (n + 1) % 100 == 0:
            print(
                f"  {n + 1}/{raters} raters: {written:,} guesses"
                f" ({time.perf_counter() - started:.0f} s)"
            )
    with connection.cursor() as cursor:
        # Every table written (participants, sessions, scenes too): with stale statistics
        # on the small ones PostgreSQL plans the report's joins as nested loops over 1-row
        # estimates, twice as slow as the hash joins it picks once autovacuum has run.
        cursor.execute("ANALYZE")


VALIDATION_PREFIX = "scale validation"
# Objects a stage puts up for validation: profiles+relationship, trajectory, 5
# scenarios, 6 questions (DynToM: 4-5 scenarios and their questions per stage).
STAGE_OBJECTS = [("context", ""), ("trajectory", "")]
STAGE_OBJECTS += [("scenario", str(n)) for n in range(1, 6)]
STAGE_OBJECTS += [("question", f"q{n}") for n in range(1, 7)]


def generate_validation(stages: int, annotators: int, rng: random.Random) -> None:
    """``stages`` stages validated by ``annotators`` annotators each, every object scored
    on every criterion of its default rubric (a per-object quality plus each
    annotator's noise, so alpha is neither 0 nor 1), with a decision per object. Batches
    of at most as many stages as the item bank has (a batch holds a stage once)."""
    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from accounts.services import user_create_with_role
    from annotation.dyntom.validation.rubrics import validation_defaults_ensure
    from annotation.models import (
        Rubric,
        ValidationAssignment,
        ValidationBatch,
        ValidationDecision,
        ValidationObject,
        ValidationScore,
        ValidationStage,
    )
    from benchmarks.models import DynToMStage
    from tests.benchmarks.bench_dyntom_import import SYNTHETIC_PREFIX

    ValidationBatch.objects.filter(name__startswith=VALIDATION_PREFIX).delete()
    if stages <= 0:
        return
    started = time.perf_counter()
    validation_defaults_ensure()
    rubrics = {r.kind: r for r in Rubric.objects.order_by("kind", "-version")}
    dyntom_questions(min(stages, 700) * 60)
    bank = list(
        DynToMStage.objects.filter(work__key__startswith=SYNTHETIC_PREFIX)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    people = []
    for n in range(1, annotators + 1):
        person = User.objects.filter(username=f"scale-annotator-{n}").first()
        people.append(
            person
            or user_create_with_role(
                username=f"scale-annotator-{n}",
                password=secrets.token_urlsafe(16),
                role="annotator",
            )
        )
    now = timezone.now()
    done = 0
    while done < stages:
        take = bank[: stages - done]
        batch = ValidationBatch.objects.create(
            name=f"{VALIDATION_PREFIX} {done // len(bank) + 1}",
            k=annotators,
            kinds=["context", "trajectory", "scenario", "question"],
        )
        vstages = ValidationStage.objects.bulk_create(
            ValidationStage(batch=batch, position=i, stage_id=pk, label=f"stage {pk}")
            for i, pk in enumerate(take)
        )
        objects = ValidationObject.objects.bulk_create(
            ValidationObject(
                batch=batch,
                vstage=vs,
                kind=kind,
                ref=ref,
                position=i,
                label=f"{kind} {ref}".strip(),
                k=annotators,
            )
            for vs in vstages
            for i, (kind, ref) in enumerate(STAGE_OBJECTS)
        )
        slots = ValidationAssignment.objects.bulk_create(
            ValidationAssignment(
                object=o,
                vstage=o.vstage,
                annotator=person,
                rubric=rubrics[o.kind],
                submitted_at=now,
            )
            for o in objects
            for person in people
        )
        quality = {o.pk: rng.random() for o in objects}
        scores = []
        for slot in slots:
            for criterion in slot.rubric.criteria:
                q = quality[slot.object_id] + rng.gauss(0, 0.15)
                if criterion["scale"] == "yes_no":
                    value = int(q > 0.1)
                else:
                    value = min(5, max(1, round(1 + 4 * q)))
                scores.append(
                    ValidationScore(assignment=slot, criterion=criterion["key"], value=value)
                )
        for i in range(0, len(scores), BATCH):
            ValidationScore.objects.bulk_create(scores[i : i + BATCH])
        ValidationDecision.objects.bulk_create(
            ValidationDecision(
                object=o,
                outcome="keep" if quality[o.pk] > 0.7 else "discard",
                reason="synthetic",
                submitted=annotators,
            )
            for o in objects
        )
        done += len(take)
        print(
            f"  validation: {done:,} stages, {len(scores):,} scores in this batch"
            f" ({time.perf_counter() - started:.0f} s)"
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def generate_chartom(total: int, runs: int, rng: random.Random) -> None:
    from django.db import connection

    from benchmarks.models import QAItem, ToMDimension, Work
    from modeling.models import Prediction, Run
    from modeling.runs.signals import predictions_changed

    Run.objects.filter(name__startswith=CHARTOM_RUN_PREFIX).delete()
    Work.objects.filter(benchmark="chartom-qa", key__startswith=CHARTOM_WORK_PREFIX).delete()
    if total <= 0:
        return
    per_run = total // runs
    started = time.perf_counter()
    works = [
        Work.objects.create(
            benchmark="chartom-qa",
            key=f"{CHARTOM_WORK_PREFIX}{n}",
            title=f"Scale novel {n}",
            kind=Work.Kind.BOOK,
        )
        for n in range(10)
    ]
    dimensions = [d.value for d in ToMDimension]
    items = QAItem.objects.bulk_create(
        [
            QAItem(
                work=works[i % len(works)],
                natural_key=f"{CHARTOM_WORK_PREFIX}{i}",
                position=i // len(works),
                dimension=dimensions[i % len(dimensions)],
                context_0="",
                question=f"Synthetic question {i}?",
                answer=f"Synthetic answer {i}.",
                bonus_points=[f"point {k}" for k in range(rng.randint(2, 5))],
                misleading_choices=[f"wrong {k}" for k in range(3)],
                directness=rng.choice(["direct", "indirect"]),
            )
            for i in range(per_run)
        ],
        batch_size=BATCH,
    )
    for n in range(1, runs + 1):
        generative = n % 2 == 1
        context = (0, 1000, 2000)[n % 3]
        run = Run.objects.create(
            name=f"{CHARTOM_RUN_PREFIX}{n}",
            benchmark="chartom-qa",
            method="generative" if generative else "multichoice",
            model=f"synthetic-model-{n}",
            params={"context": context},
            imported=True,
            status=Run.Status.SUCCEEDED,
        )
        skill = 0.3 + 0.6 * (n - 1) / max(1, runs - 1)
        rows = []
        for item in items:
            if generative:
                total_points = len(item.bonus_points)
                covered = sorted(k for k in range(total_points) if rng.random() < skill)
                words = rng.randint(20, 120)
                details = {
                    "task": "generative",
                    "context": context,
                    "bonus_points_total": total_points,
                    "bonus_points_included": covered,
                    "defects": [] if rng.random() < skill else ["misreads the scene"],
                    "response_chars": words * 6,
                    "answer_chars": 240,
                    "response_words": words,
                    "answer_words": 40,
                }
                answer, right = "", None
            else:
                right = rng.random() < skill
                answer = "a" if right else rng.choice("bcd")
                details = {"task": "multichoice", "context": context, "gold_letter": "a"}
            rows.append(
                Prediction(
                    run=run,
                    qa_item=item,
                    parsed_answer=answer,
                    parse_status=Prediction.ParseStatus.OK,
                    correct=right,
                    details=details,
                    model=run.model,
                )
            )
        Prediction.objects.bulk_create(rows, batch_size=BATCH)
        Run.objects.filter(pk=run.pk).update(
            total_calls=per_run, done_calls=per_run, finished_at=run.created_at
        )
        # As an import does once its predictions are written: the report packs them.
        predictions_changed.send(sender=Prediction, run_ids=[run.pk])
        print(
            f"  CharToM-QA run {n}/{runs}: {per_run:,} predictions"
            f" ({time.perf_counter() - started:.0f} s)"
        )
    # As after the other parts: autovacuum is off on the test server, and without fresh
    # statistics PostgreSQL planned the report's read as nested loops (0.42 s, not 0.26).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def cmd_generate(args) -> None:
    rng = random.Random(args.seed)
    started = time.perf_counter()
    generate_predictions(args.predictions, args.runs, rng)
    if args.guesses:  # --guesses 0: predictions only (no TVShowGuess works needed)
        generate_guesses(args.guesses, args.raters, rng)
    generate_validation(args.validation_stages, args.annotators, rng)
    generate_chartom(args.chartom_predictions, args.chartom_runs, rng)
    print(f"generated in {time.perf_counter() - started:.0f} s")


# -- measure ------------------------------------------------------------------------------


def _timed(client, path: str, *, stream: bool = False) -> tuple[float, int, int, float | None]:
    """(seconds, status, bytes, peak MB of Python allocations while a stream was served).

    Memory is traced for the streamed exports only: tracemalloc slows Python down
    several times, so page and API timings run without it.
    """
    if stream:
        tracemalloc.start()
    started = time.perf_counter()
    response = client.get(path)
    size = 0
    if stream and response.streaming:
        for chunk in response.streaming_content:
            size += len(chunk)
    else:
        size = len(response.content)
    elapsed = time.perf_counter() - started
    if not stream:
        return elapsed, response.status_code, size, None
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, response.status_code, size, peak / 2**20


def cmd_measure(args) -> None:
    from django.core.cache import cache
    from django.test import Client

    from accounts.services import user_create_with_role
    from modeling.models import Prediction
    from studies.models import Guess

    user = user_create_with_role(
        username="scale-researcher", password=secrets.token_urlsafe(16), role="researcher"
    )
    client = Client()
    client.force_login(user)
    print(
        f"data: {Prediction.objects.filter(run__benchmark='dyntom').count():,} DynToM "
        f"predictions, {Guess.objects.count():,} human guesses; load average "
        f"{' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
    )
    # The process's first request imports the report modules (charts, metrics: about
    # a second); a cheap page takes that, so "first" below is a report not yet cached.
    seconds, status, _, _ = _timed(client, "/reports/")
    print(f"warm-up: report index {status} in {seconds:.2f} s (imports)")
    cache.clear()
    # (name, path, streamed, fresh): fresh clears the report cache first, so the API
    # lines show both its own first build and its answer once the page has built the
    # same report (they share the cache, as they share the build).
    checks = [
        ("DynToM report page", "/reports/dyntom/", False, False),
        ("DynToM report page (again)", "/reports/dyntom/", False, False),
        ("API report DynToM (page built)", "/api/reports/dyntom/", False, False),
        ("TVShowGuess report page", "/reports/tvshowguess/", False, False),
        ("TVShowGuess report page (again)", "/reports/tvshowguess/", False, False),
        ("API report TVShowGuess (page built)", "/api/reports/tvshowguess/", False, False),
        ("API report TVShowGuess (first build)", "/api/reports/tvshowguess/", False, True),
        ("API report DynToM (first build)", "/api/reports/dyntom/", False, True),
        ("tidy CSV TVShowGuess (streamed)", "/reports/tvshowguess/tidy.csv", True, False),
        ("tidy CSV DynToM (streamed)", "/reports/dyntom/tidy.csv", True, False),
        ("long JSON DynToM (streamed)", "/reports/dyntom/export.json", True, False),
        ("validation report page", "/reports/validation/", False, False),
        ("validation report page (again)", "/reports/validation/", False, False),
        ("validation report JSON", "/reports/validation/export.json", False, False),
        ("CharToM-QA report page", "/reports/chartom-qa/", False, False),
        ("CharToM-QA report page (again)", "/reports/chartom-qa/", False, False),
        ("API report CharToM-QA (page built)", "/api/reports/chartom-qa/", False, False),
        ("API report CharToM-QA (first build)", "/api/reports/chartom-qa/", False, True),
    ]
    only = set(args.only or [])
    print(f"{'request':<36}{'status':>7}{'seconds':>9}{'MB out':>9}{'peak MB':>9}")
    for name, path, stream, fresh in checks:
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        if fresh:
            cache.clear()
        seconds, status, size, peak = _timed(client, path, stream=stream)
        traced = f"{peak:>9.1f}" if peak is not None else f"{'':>9}"
        print(f"{name:<36}{status:>7}{seconds:>9.3f}{size / 2**20:>9.1f}{traced}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    gen = sub.add_parser("generate")
    gen.add_argument("--predictions", type=int, default=1_000_000)
    gen.add_argument("--runs", type=int, default=20)
    gen.add_argument("--guesses", type=int, default=100_000)
    gen.add_argument("--raters", type=int, default=500)
    gen.add_argument("--validation-stages", type=int, default=1000)
    gen.add_argument("--annotators", type=int, default=4)
    gen.add_argument("--chartom-predictions", type=int, default=100_000)
    gen.add_argument("--chartom-runs", type=int, default=10)
    gen.add_argument("--seed", type=int, default=1)
    measure = sub.add_parser("measure")
    measure.add_argument("--only", nargs="*", help="only the checks whose name contains this")
    args = parser.parse_args()
    _setup()
    {"generate": cmd_generate, "measure": cmd_measure}[args.cmd](args)


if __name__ == "__main__":
    main()
