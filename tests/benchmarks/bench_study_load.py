"""Load check for the rater pages under the production server, against PostgreSQL.

A script, not a test (pytest does not collect it). It imports TVShowGuess Friends (plus
``--copies`` renamed copies, so fast raters do not run out of scenes), creates a live
study with room for every rater on every scene (overlap = raters, at least a fifth
seen and a fifth unseen), starts gunicorn exactly as ``make serve`` does
(config/gunicorn_conf.py; ``--workers`` x ``--threads``) serving
``tests/benchmarks/bench_wsgi.py`` (the same app plus a header with each request's
server time, CPU time and query count), and runs ``--loops`` closed loops for
``--seconds``, each with its own keep-alive connection and cookies, as
``../shared/bench/annotation_load.py`` runs them (so the figures compare with its
Label Studio runs):

- ``closed``: next (GET /s/<token>/, the scene page) -> submit the whole form as a
  browser posts it (a random candidate per masked speaker, the tag groups, empty
  notes, the history flag 40 % of the time). The first time, and at each new work,
  consent / "seen it?" / history are answered first (kinds ``onboarding page`` and
  ``onboarding post``, and ``onboarding`` for both together).
- ``autosave``: the same, plus one htmx save per speaker before the submit.
- ``rich``: every speaker's choice saved, tags half the time, the flag, then the
  submit; 5 % double submits and 5 % saves after the submit (must be refused, 422);
  afterwards every acknowledged answer is checked against the database.

``--think MIN MAX`` pauses before every request but a loop's first (human pacing:
``--think 3 9``). ``--arrive S`` starts each loop at a seeded random moment within S
seconds (a study going live: ``--loops 100 --arrive 5``). ``--loops`` above
``--raters`` gives raters several tabs (loops share invite tokens round-robin): the
second tab's submit of a scene the first tab submitted must land like a replay (302),
never an error page.

It prints accepted scenes/s (tasks/s) and answers/s (masked speakers answered), per
request kind p50/p95/p99 as the client saw them, the server's CPU ms and queries
per request (from the header), CPU of the whole gunicorn tree and of PostgreSQL
(from /proc), the load average, and the database checks: no answer stored twice,
no rater given a scene twice, no scene over its quota, every submitted scene fully
answered and scored.

``--study generic`` drives a mapped multiple-choice study instead: ToMBench (imported
once from ``../shared/data/tombench`` with its built-in mapping), ``--per-ability``
items of each ability, ``--overlap`` participants per item (the budget, the same for
both designs), answers allocated by ``--allocation uniform|balanced``. Each loop is one
participant after another, each with a fresh invite token: consent and the batch offer
(kinds ``onboarding page`` / ``onboarding post``), the take (``take``), then per item
its page (``next``) and the answer, a random option (``submit``), and the last page
(``done``). It prints items answered/s, and checks no answer stored twice, no
participant given an item twice, the budget and every item's quota kept, and every
submitted item answered once and scored. Figures: docs/benchmarks.md, "Adaptive
allocation under load" (since bef5769 a balanced study's answer runs a uniform one's
statements; the take one query more).

    .venv/bin/python tests/benchmarks/bench_study_load.py [--mode closed] [--loops 50]
        [--raters 50] [--seconds 60] [--think 3 9] [--arrive 5] [--workers 4 --threads 4]
        [--json out.json]
    .venv/bin/python tests/benchmarks/bench_study_load.py --study generic
        [--allocation uniform|balanced] [--items-per-participant 10] [--per-ability 10]
        [--overlap 40] [--loops 50] [--seconds 40]

DATABASE_URL defaults to postgres://postgres@127.0.0.1:5432/tomlab_bench (created
when missing); SQLite is refused. Earlier load-check studies are deleted at the
start; the imported works are kept.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/tomlab_bench"
STUDY_PREFIX = "load check"
COPY_PREFIX = "friends_loadcopy_"
TOMBENCH_KEY = "tombench@jsonl"

FAMILIARITY_RE = re.compile(r'action="(/s/[^"]+/works/\d+/familiarity/)"')
HISTORY_RE = re.compile(r'action="(/s/[^"]+/history/\d+/confirm/)"')
CONSENT_RE = re.compile(r'action="(/s/[^"]+/consent/)"')
SUBMIT_RE = re.compile(r'action="(/s/[^"]+/scenes/(\d+)/submit/)"')
CHOICE_RE = re.compile(r'name="choice-(\d+)" value="(\d+)"')
TAG_RE = re.compile(r'name="tags-(\d+)" value="([^"]+)"')
CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
# --study generic: the batch offer's Start, an item's answer form and its options.
TAKE_RE = re.compile(r'action="(/s/[^"]+/items/take/)"')
ANSWER_RE = re.compile(r'action="(/s/[^"]+/choices/(\d+)/)"')
OPTION_RE = re.compile(r'name="option" value="(\d+)"')


# -- /proc: CPU of a process tree (the shared load generator's helpers, stdlib only) --------

CLK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    return s[s.rindex(")") + 2 :].split()


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants, plus its reaped children."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                rest = _stat(int(d))
            except (OSError, IndexError):
                continue
            parents[int(d)] = int(rest[1])
            ticks[int(d)] = int(rest[11]) + int(rest[12])
    children = defaultdict(list)
    for pid, ppid in parents.items():
        children[ppid].append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    try:
        rest = _stat(root)
        total += int(rest[13]) + int(rest[14])  # exited children (PostgreSQL backends)
    except OSError:
        pass
    return total / CLK


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# -- the server -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(
    port: int, workers: int, threads: int, worker_class: str, log: Path
) -> subprocess.Popen:
    """gunicorn as `make serve` runs it (same config file), serving the measuring app."""
    env = {
        **os.environ,
        "WEB_WORKERS": str(workers),
        "WEB_THREADS": str(threads),
        "WEB_WORKER_CLASS": worker_class,
        "BIND": f"127.0.0.1:{port}",
        "PYTHONPATH": str(ROOT),
    }
    gunicorn = Path(sys.executable).with_name("gunicorn")
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(gunicorn), "-c", "config/gunicorn_conf.py", "tests.benchmarks.bench_wsgi"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 90
    up = 0
    while time.monotonic() < deadline and up < workers * 2:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            up += conn.getresponse().status == 200
            conn.close()
        except OSError:
            time.sleep(0.3)
    if up < workers * 2:
        proc.terminate()
        raise SystemExit("gunicorn did not answer /healthz within 90 s")
    time.sleep(2)  # every worker has imported Django by now
    return proc


# -- one loop (a rater's browser tab) -----------------------------------------------------


@dataclass
class Timing:
    kind: str
    status: int
    client_ms: float
    server_ms: float | None
    cpu_ms: float | None
    queries: int | None


@dataclass
class Loop:
    index: int
    token: str
    seen: bool
    port: int
    rng: random.Random
    think: tuple[float, float] | None
    mode: str
    timings: list[Timing] = field(default_factory=list)
    # rich mode: what the server acknowledged, checked against the database afterwards
    choices: dict[tuple[int, int], int] = field(default_factory=dict)
    tags: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    flags: dict[int, bool] = field(default_factory=dict)
    submitted: set[int] = field(default_factory=set)
    speakers_answered: int = 0
    replays: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    csrf: str = ""
    conn: http.client.HTTPConnection | None = None
    first_request: bool = True
    arrive_s: float = 0.0  # --arrive: when this participant opens their link
    onboarding: bool = False  # the last page was a step before the scenes

    def request(self, kind: str, method: str, path: str, data=None, htmx=False):
        # As annotation_load.py paces: before every request but a loop's first, except
        # the onboarding steps (the next page is fetched first, then found to be one).
        if self.think and not self.first_request and not kind.startswith("onboarding"):
            time.sleep(self.rng.uniform(*self.think))
        self.first_request = False
        headers = {"Connection": "keep-alive", "Accept": "text/html"}
        if self.csrf:
            headers["Cookie"] = f"csrftoken={self.csrf}"
            if htmx:
                headers["X-CSRFToken"] = self.csrf
        if htmx:
            headers["HX-Request"] = "true"
        body = None
        if data is not None:
            if not htmx:
                data = [("csrfmiddlewaretoken", self.csrf), *_pairs(data)]
            body = urlencode(data, doseq=True)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            started = time.perf_counter()
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                text = response.read().decode()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection the server closed while idle: only safe to
                # retry when nothing could have been processed (a GET).
                self.conn.close()
                self.conn = None
                if attempt == 2 or method != "GET":
                    raise
                continue
            client_ms = (time.perf_counter() - started) * 1000
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            break
        for cookie in response.headers.get_all("Set-Cookie") or []:
            if cookie.startswith("csrftoken="):
                self.csrf = cookie.split(";", 1)[0].split("=", 1)[1]
        bench = response.getheader("X-Bench", "").split()
        server_ms, cpu_ms, queries = (
            (float(bench[0]), float(bench[1]), int(bench[2])) if bench else (None, None, None)
        )
        self.timings.append(Timing(kind, response.status, client_ms, server_ms, cpu_ms, queries))
        if response.status >= 500:
            self.errors.append(f"{method} {path}: {response.status}")
        return response.status, text

    def run(self, stop: threading.Event) -> None:
        if stop.wait(self.arrive_s):
            return
        try:
            while not stop.is_set():
                kind = "onboarding page" if self.onboarding else "next"
                status, page = self.request(kind, "GET", f"/s/{self.token}/")
                if status != 200:
                    raise RuntimeError(f"GET start: {status}")
                self.onboarding = not SUBMIT_RE.search(page)
                if match := SUBMIT_RE.search(page):
                    self.timings[-1].kind = "next"
                    if self.mode == "rich":
                        self.scene_rich(page, match[1], int(match[2]))
                    else:
                        self.scene(page, match[1], int(match[2]))
                    continue
                self.timings[-1].kind = "onboarding page"  # not a scene page
                if match := CONSENT_RE.search(page):
                    self.post("onboarding post", match[1], {})
                elif match := FAMILIARITY_RE.search(page):
                    self.post("onboarding post", match[1], {"seen": "yes" if self.seen else "no"})
                elif match := HISTORY_RE.search(page):
                    self.post("onboarding post", match[1], {})
                else:
                    break  # the final report: nothing left for this rater
        except Exception as exc:  # reported, not raised: the other loops go on
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.conn is not None:
                self.conn.close()

    def post(self, kind: str, path: str, data) -> int:
        """A plain form POST; the rater pages answer every accepted one with a redirect."""
        status, text = self.request(kind, "POST", path, data)
        if status != 302:
            raise RuntimeError(f"{kind}: {status} {_message(text)!r}")
        return status

    def scene(self, page: str, submit_path: str, assignment: int) -> None:
        """closed / autosave: as ../shared/bench/annotation_load.py's ToMLab adapter."""
        speakers = Counter(int(i) for i, _ in CHOICE_RE.findall(page))
        choices = {iid: self.rng.randrange(n) for iid, n in speakers.items()}
        if self.mode == "autosave":
            save = submit_path.replace("/submit/", "/save/")
            for iid, choice in choices.items():
                status, text = self.request(
                    "save", "POST", save, [(f"choice-{iid}", str(choice))], htmx=True
                )
                if status != 200:
                    raise RuntimeError(f"save: {status} {_message(text)!r}")
        form = []
        for iid, choice in choices.items():
            form += [(f"choice-{iid}", str(choice)), (f"tags-{iid}-sent", "1")]
            form.append((f"evidence-{iid}", ""))
        form.append(("history_needed-sent", "1"))
        if self.rng.random() < 0.4:
            form.append(("history_needed", "1"))
        self.post("submit", submit_path, form)
        self.submitted.add(assignment)
        self.speakers_answered += len(choices)

    def scene_rich(self, page: str, submit_path: str, assignment: int) -> None:
        save_path = submit_path.replace("/submit/", "/save/")
        speakers: dict[int, int] = Counter(int(i) for i, _ in CHOICE_RE.findall(page))
        tag_names = list(dict.fromkeys(t for _, t in TAG_RE.findall(page)))
        form: list[tuple[str, str]] = []
        for instance, candidates in speakers.items():
            choice = self.rng.randrange(candidates)
            status, _ = self.request(
                "save", "POST", save_path, {f"choice-{instance}": choice}, htmx=True
            )
            if status != 200:
                raise RuntimeError(f"save choice: {status}")
            self.choices[(assignment, instance)] = choice
            form += [(f"choice-{instance}", str(choice)), (f"tags-{instance}-sent", "1")]
            if self.rng.random() < 0.5:
                chosen = self.rng.sample(tag_names, k=self.rng.randint(1, 2))
                fields = [(f"tags-{instance}", t) for t in chosen]
                status, _ = self.request(
                    "save", "POST", save_path, [*fields, (f"tags-{instance}-sent", "1")], True
                )
                if status != 200:
                    raise RuntimeError(f"save tags: {status}")
                self.tags[(assignment, instance)] = chosen
                form.extend(fields)
            else:
                self.tags.setdefault((assignment, instance), [])
        flag = self.rng.random() < 0.4
        sent = {"history_needed-sent": "1"} | ({"history_needed": "1"} if flag else {})
        status, _ = self.request("save", "POST", save_path, sent, htmx=True)
        if status != 200:
            raise RuntimeError(f"save flag: {status}")
        self.flags[assignment] = flag
        form += list(sent.items())
        self.post("submit", submit_path, form)
        self.submitted.add(assignment)
        self.speakers_answered += len(speakers)
        if self.rng.random() < 0.05:  # a double click: the same submit again
            self.post("submit-replay", submit_path, form)
            self.replays["submit"] += 1
        if self.rng.random() < 0.05:  # a stale tab changing an answer after the submit
            instance = next(iter(speakers))
            changed = (self.choices[(assignment, instance)] + 1) % speakers[instance]
            status, _ = self.request(
                "save-after-submit", "POST", save_path, {f"choice-{instance}": changed}, True
            )
            self.replays["save after submit"] += 1
            if status != 422:
                raise RuntimeError(f"save after submit answered {status}, not 422")


class TokenPool:
    """The invite tokens not used yet, handed to the loops one participant at a time."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = iter(tokens)
        self._lock = threading.Lock()

    def take(self) -> str | None:
        with self._lock:
            return next(self._tokens, None)


@dataclass
class GenericLoop(Loop):
    """--study generic: each pass is a new participant (a fresh invite token) who
    consents, takes the batch, then answers each item with a random option."""

    pool: TokenPool | None = None

    def run(self, stop: threading.Event) -> None:
        try:
            if stop.wait(self.arrive_s):
                return
            while not stop.is_set():
                token = self.pool.take()
                if token is None:
                    raise RuntimeError("no invite token left: invite more participants")
                self.participant(token, stop)
        except Exception as exc:  # reported, not raised: the other loops go on
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.conn is not None:
                self.conn.close()

    def participant(self, token: str, stop: threading.Event) -> None:
        start = f"/s/{token}/"
        _, page = self.request("onboarding page", "GET", start)
        if match := CONSENT_RE.search(page):
            self.post("onboarding post", match[1], {})
            _, page = self.request("onboarding page", "GET", start)
        match = TAKE_RE.search(page)
        if match is None:
            raise RuntimeError(f"no batch offered: {_message(page)!r}")
        self.post("take", match[1], {})
        while not stop.is_set():
            _, page = self.request("next", "GET", start)
            match = ANSWER_RE.search(page)
            if match is None:
                self.timings[-1].kind = "done"  # the last page: results, completion
                return
            option = self.rng.choice(OPTION_RE.findall(page))
            self.post("submit", match[1], {"option": option, "action": "submit"})
            self.submitted.add(int(match[2]))
            self.speakers_answered += 1


def _pairs(data) -> list[tuple[str, str]]:
    items = data.items() if isinstance(data, dict) else data
    return [(k, str(v)) for k, v in items]


def _message(text: str) -> str:
    match = re.search(r'role="alert">(.*?)</', text, re.DOTALL)
    return (match[1] if match else text[:160]).strip()


# -- set-up and checks -------------------------------------------------------------------


def ensure_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created database {name}")


def postmaster_pid() -> int | None:
    """The PostgreSQL server's PID: the parent of this connection's backend (if local)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    try:
        return int(_stat(backend)[1])
    except OSError:
        return None  # the database runs elsewhere: its CPU is not reported


def import_works(copies: int, workdir: Path):
    from django.conf import settings
    from django.core.management import call_command

    from benchmarks.models import Work

    raw = Path(settings.TOMLAB_SHARED_DATA) / "tvshowguess" / "friends.raw"
    keys = ["friends", *(f"{COPY_PREFIX}{i}" for i in range(1, copies + 1))]
    have = set(Work.objects.filter(benchmark="tvshowguess", key__in=keys).values_list("key"))
    for key in keys:
        if (key,) in have:
            continue
        path = raw
        if key != "friends":
            # copyfile, not copytree: the shared data is read-only and its mode must not follow.
            path = workdir / f"{key}.raw"
            shutil.copyfile(raw, path)
        call_command("import_benchmark", "tvshowguess", str(path), verbosity=0)
    works = {w.key: w for w in Work.objects.filter(benchmark="tvshowguess", key__in=keys)}
    return [works[k] for k in keys]


def scene_study(args, raters: int, workdir: Path):
    """The TVShowGuess study: Friends and its copies, room for every rater on every scene."""
    from studies.services import study_create, study_go_live

    works = import_works(args.copies, workdir)
    quota = raters // 5
    study = study_go_live(
        study=study_create(
            name=f"{STUDY_PREFIX} {time.strftime('%Y-%m-%d %H:%M:%S')}",
            benchmark="tvshowguess",
            works=works,
            overlap=raters,  # room for every rater on every scene
            min_seen=quota,
            min_unseen=quota,
        )
    )
    return study, (
        f"{len(works)} works, {study.study_items.count()} scenes, overlap {study.overlap} "
        f"(seen >= {quota}, unseen >= {quota})"
    )


def import_tombench():
    """ToMBench's 20 JSONL files through the generic importer and its built-in mapping,
    as `import_benchmark generic … --mapping ToMBench` imports them (once)."""
    from django.conf import settings
    from django.core.management import call_command

    from benchmarks.models import Work

    work = Work.objects.filter(benchmark="generic", key=TOMBENCH_KEY).first()
    if work is None:
        folder = Path(settings.TOMLAB_SHARED_DATA) / "tombench"
        call_command(
            "import_benchmark",
            "generic",
            str(folder),
            "--mapping",
            "ToMBench",
            "--name",
            "ToMBench",
            "--version",
            "jsonl",
            "--no-progress",
            verbosity=0,
        )
        work = Work.objects.get(benchmark="generic", key=TOMBENCH_KEY)
    return work


def generic_study(args):
    """A live ToMBench study: ``--per-ability`` items of each ability, ``--overlap``
    participants per item (the budget, overlap x items, is the same for both designs),
    batches of ``--items-per-participant``, the answers allocated by ``--allocation``."""
    from studies.choice import allocation
    from studies.choice import services as cs
    from studies.choice.generic import GenericSpec
    from studies.services import study_go_live

    study = study_go_live(
        study=cs.choice_study_create(
            name=f"{STUDY_PREFIX} {args.allocation} {time.strftime('%Y-%m-%d %H:%M:%S')}",
            benchmark=cs.GENERIC,
            works=[import_tombench()],
            generic=GenericSpec(
                category_field="ability",
                per_category=args.per_ability,
                items_per_participant=args.items_per_participant,
            ),
            allocation_spec=allocation.AllocationSpec(design=args.allocation),
            seed=args.seed,
            overlap=args.overlap,
        ).study
    )
    budget = allocation.study_budget(study)
    return study, (
        f"ToMBench, {study.study_items.count()} items by ability, {args.overlap} "
        f"participants per item ({budget} answers), batches of {args.items_per_participant}; "
        f"{allocation.design_text(study)}"
    )


def pct(values: list[float], p: float) -> float | None:
    """The p-th percentile, nearest rank (as annotation_load.py computes it)."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, min(len(v) - 1, round(p / 100.0 * len(v) + 0.5) - 1))]


def _repeated(rows, *fields: str) -> int:
    """How many combinations of ``fields`` occur in more than one of ``rows``."""
    from django.db.models import Count

    return rows.values(*fields).annotate(n=Count("pk")).filter(n__gt=1).count()


def db_check(study) -> dict[str, int]:
    """Duplicates and over-quota, read back from the database."""
    from django.db.models import Count, Q

    from studies.models import Assignment, Guess

    assignments = Assignment.objects.filter(study_item__study=study)
    submitted = assignments.filter(status="submitted")
    guesses = Guess.objects.filter(assignment__study_item__study=study)
    over = study.study_items.annotate(
        n=Count("assignments"),
        seen=Count("assignments", filter=Q(assignments__seen=True)),
        unseen=Count("assignments", filter=Q(assignments__seen=False)),
    ).filter(
        Q(n__gt=study.overlap)
        | Q(seen__gt=study.overlap - study.min_unseen)
        | Q(unseen__gt=study.overlap - study.min_seen)
    )
    return {
        "assignments": assignments.count(),
        "submitted_scenes": submitted.count(),
        "guesses_stored": guesses.count(),
        "guesses_stored_twice": _repeated(guesses, "assignment", "instance"),
        "rater_scene_pairs_assigned_twice": _repeated(assignments, "participant", "study_item"),
        "scenes_over_quota": over.count(),
        "submitted_with_unanswered_or_unscored_speaker": submitted.filter(
            Q(guesses__answer="") | Q(guesses__correct__isnull=True)
        )
        .distinct()
        .count(),
    }


def db_check_generic(study) -> dict[str, int]:
    """--study generic: duplicates, the budget and each item's quota."""
    from django.db.models import Count, F, Q

    from studies.choice import allocation
    from studies.counting import counted_participants
    from studies.models import Assignment, ChoiceAnswer, StratumTally, StudyItem

    assignments = Assignment.objects.filter(study_item__study=study)
    counted = assignments.filter(counted_participants(), study_item__role=StudyItem.Role.TEST)
    answers = ChoiceAnswer.objects.filter(assignment__study_item__study=study)
    budget = allocation.study_budget(study)
    # A uniform study's items take the overlap each; an adaptive one's the budget's cap.
    quota = (
        allocation.cap_per_item(budget, study.sampling["items_per_participant"])
        if allocation.is_adaptive(study)
        else study.overlap
    )
    places = counted.values("study_item").annotate(n=Count("pk"))
    return {
        "assignments": assignments.count(),
        "submitted_items": assignments.filter(status="submitted").count(),
        "answers_stored": answers.count(),
        "answers_stored_twice": _repeated(answers, "assignment", "round"),
        "participant_item_pairs_assigned_twice": _repeated(
            assignments, "participant", "study_item"
        ),
        "budget": budget,
        "places_counted": counted.count(),
        "places_over_budget": max(0, counted.count() - budget),
        "items_over_quota": places.filter(n__gt=quota).count(),
        "submitted_without_one_scored_answer": assignments.filter(status="submitted")
        .annotate(n=Count("choices", filter=Q(choices__correct__isnull=False)))
        .exclude(n=1)
        .count(),
        "answers_on_open_items": answers.exclude(assignment__status="submitted").count(),
        "answers_not_for_their_item": answers.exclude(
            mc_item_id=F("assignment__study_item__mc_item_id")
        ).count(),
        "strata": StratumTally.objects.filter(study=study).count(),
    }


# The database checks that must find nothing.
SCENE_CHECKS = (
    "guesses_stored_twice",
    "rater_scene_pairs_assigned_twice",
    "scenes_over_quota",
    "submitted_with_unanswered_or_unscored_speaker",
)
GENERIC_CHECKS = (
    "answers_stored_twice",
    "participant_item_pairs_assigned_twice",
    "places_over_budget",
    "items_over_quota",
    "submitted_without_one_scored_answer",
    "answers_on_open_items",
    "answers_not_for_their_item",
)


def verify_rich(study, loops: list[Loop]) -> list[str]:
    """rich mode: every acknowledged answer is stored as sent, every acknowledged submit is."""
    from studies.models import Assignment, Guess

    problems: list[str] = []
    assignments = {
        a.pk: a for a in Assignment.objects.filter(study_item__study=study).prefetch_related()
    }
    guesses = {
        (g.assignment_id, g.instance_id): g
        for g in Guess.objects.filter(assignment__in=list(assignments)).select_related("instance")
    }
    lost = wrong = 0
    for loop in loops:
        for (assignment_id, instance_id), choice in loop.choices.items():
            guess = guesses.get((assignment_id, instance_id))
            if guess is None:
                lost += 1
            elif guess.answer != guess.instance.candidates[choice] or sorted(guess.tags) != sorted(
                loop.tags.get((assignment_id, instance_id), [])
            ):
                wrong += 1
        for assignment_id in loop.submitted:
            assignment = assignments[assignment_id]
            if assignment.status != "submitted":
                lost += 1
            elif assignment.history_needed is not loop.flags[assignment_id]:
                wrong += 1
    if lost:
        problems.append(f"{lost} acknowledged answers or submits missing")
    if wrong:
        problems.append(f"{wrong} stored answers differ from what was acknowledged")
    return problems


# -- main -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", choices=["scene", "generic"], default="scene")
    parser.add_argument("--mode", choices=["closed", "autosave", "rich"], default="closed")
    parser.add_argument("--loops", type=int, default=50, help="concurrent loops (50)")
    parser.add_argument("--raters", type=int, help="invite tokens (default: one per loop)")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--think", type=float, nargs=2, metavar=("MIN", "MAX"))
    parser.add_argument(
        "--arrive",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="loops start at seeded random moments within this many seconds (0: all at once)",
    )
    parser.add_argument("--copies", type=int, default=10, help="extra copies of Friends (10)")
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--worker-class", choices=["gthread", "sync"], default="gthread")
    parser.add_argument("--seed", type=int, default=1)
    generic = parser.add_argument_group("--study generic (ToMBench)")
    generic.add_argument("--allocation", choices=["uniform", "balanced"], default="uniform")
    generic.add_argument("--items-per-participant", type=int, default=10)
    generic.add_argument("--per-ability", type=int, default=10, help="items per ability (10)")
    generic.add_argument("--overlap", type=int, default=40, help="participants per item (40)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    if args.study == "generic" and args.mode != "closed":
        parser.error("--study generic runs closed loops only")
    raters = args.raters or args.loops
    threads_each = 1 if args.worker_class == "sync" else args.threads

    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not os.environ["DATABASE_URL"].startswith(("postgres://", "postgresql://")):
        raise SystemExit("the load check needs PostgreSQL: set DATABASE_URL=postgres://…")
    # Production settings, as `make serve` runs them.
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
    sys.path.insert(0, str(ROOT))
    ensure_database(os.environ["DATABASE_URL"])

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from studies.participation.services import participants_invite

    workdir = Path(tempfile.mkdtemp(prefix="study-load-"))
    server = None
    try:
        call_command("migrate", verbosity=0)
        call_command("collectstatic", "--noinput", verbosity=0)
        from studies.models import Study

        Study.objects.filter(name__startswith=STUDY_PREFIX).delete()
        if args.study == "generic":
            study, described = generic_study(args)
            # Enough for every place of the budget, however the loops share them.
            from studies.choice.allocation import study_budget

            raters = -(-study_budget(study) // args.items_per_participant) + args.loops
        else:
            study, described = scene_study(args, raters, workdir)
        # The previous runs' rows are dead tuples now; where autovacuum is off (as on
        # our test server) they would slow every later run a little more.
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        invited = participants_invite(
            study=study, labels=[f"load rater {i}" for i in range(raters)]
        )
        pg = postmaster_pid()
        print(
            f"PostgreSQL {connection.settings_dict['NAME']}; {os.cpu_count()} CPUs; study "
            f"{study.pk}: {described}; cache "
            f"{os.environ.get('CACHE_URL', 'locmem (per process)')}"
        )
        connection.close()

        port = free_port()
        load_before = loadavg()
        server = start_gunicorn(
            port, args.workers, args.threads, args.worker_class, workdir / "server.log"
        )
        print(
            f"gunicorn {args.workers} workers x {threads_each} threads ({args.worker_class}) "
            f"on :{port}; "
            f"{args.study} study, mode {args.mode}, {args.loops} loops over {raters} raters, "
            f"{args.seconds:.0f} s, "
            f"think {args.think or 'none'}, arrivals within {args.arrive:g} s; "
            f"load average before: {load_before}"
        )
        master = random.Random(args.seed)
        pool = TokenPool([p.token for p in invited])

        def loop(i: int) -> Loop:
            common = {
                "index": i,
                "port": port,
                "rng": random.Random(master.random()),
                "think": tuple(args.think) if args.think else None,
                "mode": args.mode,
                # Drawn only when asked, so runs without --arrive keep their old seeds.
                "arrive_s": master.uniform(0, args.arrive) if args.arrive else 0.0,
            }
            if args.study == "generic":  # a new participant after each batch
                return GenericLoop(**common, token="", seen=False, pool=pool)
            return Loop(**common, token=invited[i % raters].token, seen=(i % raters) % 2 == 0)

        loops = [loop(i) for i in range(args.loops)]
        stop = threading.Event()
        threads = [threading.Thread(target=loop.run, args=(stop,)) for loop in loops]
        cpu0, db0, own0 = tree_cpu_s(server.pid), tree_cpu_s(pg) if pg else 0.0, os.times()
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(args.seconds)
        stop.set()
        for thread in threads:
            thread.join(timeout=120 + (args.think[1] if args.think else 0))
        elapsed = time.perf_counter() - started
        cpu1, db1, own1 = tree_cpu_s(server.pid), tree_cpu_s(pg) if pg else 0.0, os.times()
        load_after = loadavg()
        hung = sum(t.is_alive() for t in threads)
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
        log = workdir / "server.log"
        server_log = log.read_text() if log.exists() else ""
        shutil.rmtree(workdir, ignore_errors=True)

    timings = [t for loop in loops for t in loop.timings]
    by_kind: dict[str, list[Timing]] = defaultdict(list)
    for t in timings:
        by_kind[t.kind].append(t)
        if t.kind.startswith("onboarding "):  # page and post together, as before the split
            by_kind["onboarding"].append(t)
    accepted = [t for t in by_kind["submit"] if t.status == 302]
    speakers = sum(loop.speakers_answered for loop in loops)
    server_cpu, db_cpu = cpu1 - cpu0, db1 - db0
    gen_cpu = (own1.user + own1.system) - (own0.user + own0.system)
    figures: dict = {
        "study": args.study,
        "allocation": args.allocation if args.study == "generic" else None,
        "mode": args.mode,
        "loops": args.loops,
        "raters": raters,
        "think_s": args.think,
        "arrive_s": args.arrive,
        "server": f"gunicorn {args.workers}x{threads_each} {args.worker_class}",
        "seconds": round(elapsed, 1),
        "requests": len(timings),
        "tasks_per_s": round(len(accepted) / elapsed, 1),
        "answers_per_s": round(speakers / elapsed, 1),
        "server_cpu_ms_per_request": round(1000 * server_cpu / max(1, len(timings)), 2),
        "db_cpu_ms_per_request": round(1000 * db_cpu / max(1, len(timings)), 2) if pg else None,
        # Per accepted scene or item: what a unit of work costs the server and the database.
        "server_cpu_ms_per_task": round(1000 * server_cpu / max(1, len(accepted)), 2),
        "db_cpu_ms_per_task": round(1000 * db_cpu / max(1, len(accepted)), 2) if pg else None,
        "server_cpu_cores": round(server_cpu / elapsed, 2),
        "db_cpu_cores": round(db_cpu / elapsed, 2) if pg else None,
        "load_generator_cpu_cores": round(gen_cpu / elapsed, 2),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "statuses": {str(k): v for k, v in sorted(Counter(t.status for t in timings).items())},
        "kinds": {},
    }
    for kind, rows in sorted(by_kind.items()):
        ok = [t for t in rows if t.status in (200, 302, 422)]
        client = [t.client_ms for t in ok]
        cpu = [t.cpu_ms for t in ok if t.cpu_ms is not None]
        queries = [t.queries for t in ok if t.queries is not None]
        figures["kinds"][kind] = {
            "n": len(rows),
            "p50_ms": _r(pct(client, 50)),
            "p95_ms": _r(pct(client, 95)),
            "p99_ms": _r(pct(client, 99)),
            "server_p95_ms": _r(pct([t.server_ms for t in ok if t.server_ms is not None], 95)),
            "cpu_ms_mean": _r(sum(cpu) / len(cpu)) if cpu else None,
            "cpu_ms_p50": _r(pct(cpu, 50)),
            "queries_max": max(queries) if queries else None,
            "queries_mean": _r(sum(queries) / len(queries)) if queries else None,
        }
    if args.study == "generic":
        check, zero, submitted = db_check_generic(study), GENERIC_CHECKS, "submitted_items"
        done = f"{figures['tasks_per_s']} items answered/s"
    else:
        check, zero, submitted = db_check(study), SCENE_CHECKS, "submitted_scenes"
        done = f"{figures['tasks_per_s']} scenes submitted/s, {figures['answers_per_s']} answers/s"
    figures["db_check"] = check
    print(
        f"\n{elapsed:.1f} s, {len(timings)} requests: {done}; CPU per "
        f"{'item' if args.study == 'generic' else 'scene'} {figures['server_cpu_ms_per_task']}"
        f" ms server + {figures['db_cpu_ms_per_task']} ms PostgreSQL; server CPU "
        f"{figures['server_cpu_ms_per_request']} ms/request ({figures['server_cpu_cores']} "
        f"cores), PostgreSQL {figures['db_cpu_ms_per_request']} ms/request "
        f"({figures['db_cpu_cores']} cores), load generator {figures['load_generator_cpu_cores']}"
        f" cores; load average after: {load_after}"
    )
    print(
        f"{'kind':<18}{'n':>7}{'p50':>9}{'p95':>9}{'p99':>9}{'srv p95':>9}"
        f"{'CPU ms':>8}{'(p50)':>7}{'queries':>9}{'(max)':>6}"
    )
    for kind, k in figures["kinds"].items():
        print(
            f"{kind:<18}{k['n']:>7}{_f(k['p50_ms']):>9}{_f(k['p95_ms']):>9}{_f(k['p99_ms']):>9}"
            f"{_f(k['server_p95_ms']):>9}{_f(k['cpu_ms_mean']):>8}{_f(k['cpu_ms_p50']):>7}"
            f"{_f(k['queries_mean']):>9}{k['queries_max'] or '':>6}"
        )
    print(f"HTTP statuses: {figures['statuses']}")
    print(f"database: {json.dumps(check)}")
    replays = sum((loop.replays for loop in loops), Counter())
    if replays:
        print(f"replays: {dict(replays)}")

    problems = []
    errors = [e for loop in loops for e in loop.errors]
    for e in errors[:10]:
        print(f"client error: {e}")
    if errors:
        problems.append(f"{len(errors)} client errors")
    if hung:
        problems.append(f"{hung} loops did not finish")
    for key in zero:
        if check[key]:
            problems.append(f"{key}: {check[key]}")
    acked = {a for loop in loops for a in loop.submitted}
    if check[submitted] != len(acked):
        problems.append(f"{check[submitted]} submitted, {len(acked)} acknowledged")
    if args.mode == "rich":
        problems += verify_rich(study, loops)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems))
        if "Traceback" in server_log:
            print(server_log[-3000:])
        raise SystemExit(1)
    print("checks: no answer stored twice, none over quota or budget, no server errors")


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _f(x) -> str:
    return "" if x is None else f"{x:.1f}"


if __name__ == "__main__":
    main()
