import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections
from tqdm import tqdm

from modeling.models import Backend, PromptTemplate, Run
from modeling.pipelines import pipeline_benchmarks
from modeling.pipelines.generic import parse_categories
from modeling.runs.executor import RunInterrupt, run_execute
from modeling.runs.leases import RunLeased
from modeling.runs.outcome import run_status_label
from modeling.runs.recording import NO_CACHE, RunProgress
from modeling.runs.selectors import run_cached_calls
from modeling.runs.services import run_cancel, run_create, run_plan, run_resume

# How often --wait polls a held run and redraws its countdown.
WAIT_POLL_S = 1.0


class Command(BaseCommand):
    help = (
        "Run a model over benchmark items (in this process with a progress bar, or queued "
        "for a Celery worker with --background). --dry-run shows the first prompt and the "
        "number of calls and tokens without calling anything."
    )
    # Like a Celery worker, this starts without Django's system checks: workers and
    # resumes start it over and over, and a check pass imports every view (0.8 s of CPU
    # a start on a 2-core machine). `manage.py check --deploy` is where deploys check.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--benchmark", choices=pipeline_benchmarks())
        parser.add_argument("--method", help="e.g. vanilla or cot")
        parser.add_argument("--backend", help="Backend name (see the admin or create_backend)")
        parser.add_argument(
            "--items",
            "--works",
            nargs="+",
            dest="works",
            metavar="KEY",
            help="work keys to include (e.g. trial50); default: all",
        )
        parser.add_argument("--split", default="")
        parser.add_argument("--limit", type=int, help="at most this many works")
        parser.add_argument(
            "--context",
            choices=["0", "1k", "2k"],
            help="CharToM-QA: the plot window shown, in tokens (default 0)",
        )
        parser.add_argument(
            "--responses-of",
            type=int,
            dest="responses_of",
            metavar="RUN_ID",
            help="CharToM-QA judge-bonus / judge-defects: the generative run to judge",
        )
        parser.add_argument(
            "--scene-limit",
            type=int,
            dest="scene_limit",
            help="speaker guessing: at most this many scenes to guess per work",
        )
        parser.add_argument(
            "--language",
            help="generic (mapped) benchmarks: the items' language, e.g. en or zh "
            "(default: the item set's first)",
        )
        parser.add_argument(
            "--category",
            action="append",
            default=[],
            metavar="FIELD=VALUE",
            help="generic (mapped) benchmarks: only items with this category value "
            "(repeatable; values of one field are alternatives), e.g. ability=false belief",
        )
        parser.add_argument(
            "--shuffle",
            action="store_true",
            help="generic (mapped) benchmarks: shuffle each item's options (see --shuffle-seed)",
        )
        parser.add_argument(
            "--shuffle-seed",
            type=int,
            dest="shuffle_seed",
            help="with --shuffle: the seed of the option orders (default 0)",
        )
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a run option of the method, e.g. shots=20, perturb_names=true, "
            "dimensions=personality,desires (repeatable)",
        )
        parser.add_argument("--model", help="model name (default: the backend's)")
        parser.add_argument("--template", help="template name[:version] (default: the method's)")
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--top-p", type=float, dest="top_p")
        parser.add_argument("--max-tokens", type=int, dest="max_tokens")
        parser.add_argument("--samples", type=int, help="samples per prompt (e.g. 3 runs averaged)")
        parser.add_argument(
            "--seed", type=int, help="sampling seed; with --samples, sample i uses seed + i"
        )
        parser.add_argument(
            "--no-cache",
            action="store_true",
            dest="no_cache",
            help="send again, do not use the cache: ask the model every call (with --resume: "
            "the calls answered from the cache); the new replies replace the cached ones",
        )
        parser.add_argument("--budget-tokens", type=int, dest="budget_tokens")
        parser.add_argument("--budget-cost", type=Decimal, dest="budget_cost")
        parser.add_argument("--name", default="")
        parser.add_argument("--dry-run", action="store_true")
        parser.add_argument("--background", action="store_true", help="queue for a worker")
        parser.add_argument(
            "--resume",
            type=int,
            metavar="RUN_ID",
            help="resume a stopped, failed or orphaned run (a dead holder is taken over at once)",
        )
        parser.add_argument(
            "--wait",
            action="store_true",
            help="with --resume: if another live process holds the run, wait for it "
            "(with a countdown) instead of refusing",
        )
        parser.add_argument("--cancel", type=int, metavar="RUN_ID", help="cancel a run")
        parser.add_argument(
            "--processes",
            type=int,
            metavar="N",
            help="engine processes for a run made here (default MODELING_RUN_PROCESSES); "
            "more than 1 helps only where one process cannot keep a fast server busy",
        )

    def handle(self, *args, **opts) -> None:
        self.processes = opts["processes"]
        if self.processes is not None and self.processes < 1:
            raise CommandError("--processes must be at least 1")
        if self.processes is not None and opts["background"]:
            raise CommandError(
                "--processes is for a run made here; workers use MODELING_RUN_PROCESSES"
            )
        if opts["cancel"]:
            run = run_cancel(run_id=opts["cancel"])
            self.stdout.write(f"run {run.pk}: {run.status}")
            return
        if opts["resume"]:
            self._resume(
                opts["resume"],
                background=opts["background"],
                wait=opts["wait"],
                send_again=opts["no_cache"],
            )
            return
        for required in ("benchmark", "method", "backend"):
            if not opts[required]:
                raise CommandError(f"--{required} is required")
        try:
            backend = Backend.objects.get(name=opts["backend"])
        except Backend.DoesNotExist:
            names = ", ".join(Backend.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no backend named {opts['backend']!r} (have: {names})") from None
        template = self._template(opts["template"])
        selection = {
            k: v
            for k, v in {
                "works": opts["works"],
                "split": opts["split"],
                "limit": opts["limit"],
                "run": opts["responses_of"],
                "scene_limit": opts["scene_limit"],
            }.items()
            if v
        }
        if opts["language"]:
            selection["language"] = opts["language"]
        if opts["category"]:
            try:
                selection["categories"] = parse_categories("\n".join(opts["category"]))
            except ValueError as exc:
                raise CommandError(f"--category {exc}") from None
        if opts["context"]:
            # Read as the import format spells it ("0", "1k", "2k"): stored in tokens.
            selection["context"] = {"0": 0, "1k": 1000, "2k": 2000}[opts["context"]]
        params = {
            k: opts[k]
            for k in ("model", "temperature", "top_p", "max_tokens", "samples", "seed")
            if opts[k] is not None
        }
        options = self._options(opts["option"])
        if opts["shuffle"]:
            options["shuffle"] = True
        if opts["shuffle_seed"] is not None:
            options["shuffle_seed"] = opts["shuffle_seed"]
        if options:
            params["options"] = options
        if opts["no_cache"]:
            params[NO_CACHE] = True
        kwargs = dict(
            benchmark=opts["benchmark"],
            method=opts["method"],
            backend=backend,
            selection=selection,
            params=params,
            template=template,
        )
        try:
            if opts["dry_run"]:
                self._print_plan(run_plan(**kwargs))
                return
            run = run_create(
                **kwargs,
                name=opts["name"],
                budget_tokens=opts["budget_tokens"],
                budget_cost=opts["budget_cost"],
                enqueue=opts["background"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if opts["background"]:
            self.stdout.write(f"run {run.pk} queued: {run.name}")
            return
        self._execute(run.pk)

    def _options(self, specs: list[str]) -> dict[str, str]:
        """KEY=VALUE pairs; the pipeline checks and converts the values."""
        options = {}
        for spec in specs:
            key, sep, value = spec.partition("=")
            if not sep or not key.strip():
                raise CommandError(f"--option {spec!r}: expected KEY=VALUE")
            options[key.strip()] = value.strip()
        return options

    def _template(self, spec: str | None) -> PromptTemplate | None:
        if not spec:
            return None
        name, _, version = spec.partition(":")
        qs = PromptTemplate.objects.filter(name=name)
        template = (
            qs.filter(version=int(version)).first() if version else qs.order_by("-version").first()
        )
        if template is None:
            raise CommandError(f"no prompt template {spec!r}")
        return template

    def _print_plan(self, plan) -> None:
        self.stdout.write(f"template: {plan.template}; model: {plan.model}")
        completion = (
            f"at most {plan.max_completion_tokens:,} completion tokens"
            if plan.max_completion_tokens
            else "completion tokens not capped (no --max-tokens)"
        )
        self.stdout.write(
            f"would make {plan.calls} call(s) ({plan.units} prompt(s) x {plan.samples} sample(s)), "
            f"about {plan.estimated_prompt_tokens:,} prompt tokens "
            f"(estimate, {plan.token_method}), {completion}"
        )
        if plan.first_messages:
            self.stdout.write("--- first prompt ---")
            for message in plan.first_messages:
                self.stdout.write(f"[{message['role']}]\n{message['content']}\n")

    def _resume(
        self, run_id: int, *, background: bool, wait: bool, send_again: bool = False
    ) -> None:
        """Take the run over (at once when its holder is gone) or say who holds it."""
        if not Run.objects.filter(pk=run_id).exists():
            raise CommandError(f"no run {run_id}")
        while True:
            try:
                run = run_resume(run_id=run_id, enqueue=background, send_again=send_again)
                break
            except RunLeased as exc:
                if not wait:
                    raise CommandError(f"{exc}; or pass --wait") from None
                self._countdown(exc)
                if Run.objects.get(pk=run_id).status not in (
                    Run.Status.RUNNING,
                    Run.Status.QUEUED,
                ):
                    run = Run.objects.get(pk=run_id)
                    self.stderr.write("")
                    self.stdout.write(f"run {run.pk} was finished by its holder: {run.status}")
                    return
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        if run.status == Run.Status.SUCCEEDED:
            self.stdout.write(f"run {run.pk} already succeeded: nothing to resume")
            return
        if background:
            self.stdout.write(f"run {run.pk} queued to resume")
            return
        self._execute(run.pk)

    def _countdown(self, leased: RunLeased) -> None:
        """One line, redrawn each second, until the lease may be taken (or is released)."""
        self.stderr.write(f"waiting: {leased}")
        deadline = time.monotonic() + leased.seconds
        while (left := deadline - time.monotonic()) > 0:
            self.stderr.write(
                f"\r  {left:4.0f} s until run {leased.run_id} may be taken over ", ending=""
            )
            self.stderr.flush()
            time.sleep(min(WAIT_POLL_S, left))
            close_old_connections()
            run = Run.objects.only("status", "lease_expires_at").get(pk=leased.run_id)
            if run.status != Run.Status.RUNNING or run.lease_expires_at is None:
                break
        self.stderr.write("")

    @contextmanager
    def _interruptible(self, run_id: int) -> Iterator[RunInterrupt]:
        """SIGINT/SIGTERM stop the run cleanly (a second one abandons calls in flight)."""
        interrupt = RunInterrupt()

        def handle(signum: int, frame: object) -> None:
            name = signal.Signals(signum).name
            first = not interrupt.requested.is_set()
            interrupt.request(name)
            # Written straight to the stream: a signal handler must not wait on locks.
            sys.stderr.write(
                f"\n{name}: stopping run {run_id}; waiting for the calls in flight "
                "(again to abandon them)\n"
                if first
                else f"\n{name}: abandoning the calls in flight\n"
            )

        if threading.current_thread() is not threading.main_thread():
            yield interrupt  # only the main thread may set signal handlers
            return
        previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield interrupt
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _execute(self, run_id: int) -> None:
        bar = tqdm(total=None, desc=f"run {run_id}", unit="call", file=self.stderr)

        def progress(state: RunProgress) -> None:
            bar.total = state.total
            bar.n = state.done + state.errors
            bar.set_postfix(errors=state.errors)
            bar.refresh()

        try:
            with self._interruptible(run_id) as interrupt:
                status = run_execute(
                    run_id=run_id,
                    on_progress=progress,
                    interrupt=interrupt,
                    processes=self.processes,
                )
        except RunLeased as exc:
            raise CommandError(f"{exc}; or pass --wait with --resume") from None
        finally:
            bar.close()
        run = Run.objects.get(pk=run_id)
        if status == "skipped":
            self.stdout.write(f"run {run.pk} is {run.status}: nothing to do")
            return
        label = run_status_label(run=run)
        # "succeeded with 3 unparseable" where some answers could not be read.
        said = label.text if status == Run.Status.SUCCEEDED else status
        self.stdout.write(
            f"run {run.pk} {said}: {run.done_calls}/{run.total_calls} calls, "
            f"{run.error_calls} errors, {run.prompt_tokens:,} prompt + "
            f"{run.completion_tokens:,} completion tokens, cost {run.cost:.4f}"
        )
        cached = run_cached_calls(run=run)
        if cached:
            self.stdout.write(f"  {cached} of the replies came from the cache")
        if run.error:
            self.stdout.write(f"  {run.error}")
        # A run with no parseable reply has every call done: resuming would ask nothing,
        # unless it sends again the calls the cache answered.
        resumable = (Run.Status.STOPPED, Run.Status.FAILED, Run.Status.BUDGET_EXHAUSTED)
        if status in resumable and not label.no_parseable_reply:
            self.stdout.write(
                f"  resume with: python manage.py run_model --resume {run.pk}"
                + (" (after raising the budget)" if status == Run.Status.BUDGET_EXHAUSTED else "")
            )
        elif status == Run.Status.FAILED and cached:
            self.stdout.write(
                f"  ask the model again with: python manage.py run_model --resume {run.pk} "
                "--no-cache"
            )
