"""Load check for the rater pages: N simulated raters answering at once against PostgreSQL.

A script, not a test (pytest does not collect it). It imports TVShowGuess Friends (plus
``--copies`` renamed copies of it, so fast raters do not run out of scenes), creates a
live study with room for every rater on every scene, starts Django's threaded web
server (the one ``runserver --noreload`` uses, serving ``config.wsgi``) in a subprocess
and lets ``--raters`` threads, each with its own keep-alive HTTP connection, take the
study through the same endpoints the rater pages use: open the invite link, consent,
"have you seen it?", confirm the history, then for each scene save every masked
speaker's choice (and sometimes tags) the way htmx does, the history flag, and submit
the whole form, with small random think times, for ``--seconds``. Some raters double
submit or replay a save after submitting, as browsers do.

Afterwards it checks the database against what the server acknowledged: every
acknowledged answer stored exactly once and as sent, every acknowledged submit
submitted, no (rater, scene) twice and no scene over its quota, and prints the
server time per request (from a ``Server-Timing`` header the server wrapper adds:
WSGI app entry to ``start_response``, i.e. Django's whole request/response cycle),
the client-observed time, and answers/s.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tomlab_bench \\
        .venv/bin/python tests/benchmarks/bench_study_load.py [--raters 50] [--seconds 60]

Without DATABASE_URL it uses postgres://postgres@127.0.0.1:5432/tomlab_bench and
creates that database when it is missing. SQLite is refused: the point is PostgreSQL.
Earlier load-check studies are deleted at the start; the imported works are kept.
"""

from __future__ import annotations

import argparse
import http.client
import os
import random
import re
import shutil
import socket
import statistics
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

FAMILIARITY_RE = re.compile(r'action="(/s/[^"]+/works/\d+/familiarity/)"')
HISTORY_RE = re.compile(r'action="(/s/[^"]+/history/\d+/confirm/)"')
CONSENT_RE = re.compile(r'action="(/s/[^"]+/consent/)"')
SUBMIT_RE = re.compile(r'action="(/s/[^"]+/scenes/(\d+)/submit/)"')
CHOICE_RE = re.compile(r'name="choice-(\d+)" value="(\d+)"')
TAG_RE = re.compile(r'name="tags-(\d+)" value="([^"]+)"')
PROGRESS_RE = re.compile(r"Scene (\d+) / (\d+)")


# -- the server (a subprocess of this script) ----------------------------------------------


def serve(port: int) -> None:
    """Django's threaded dev server (as runserver) with a Server-Timing header added."""
    import django

    django.setup()
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer, run

    class SharedPortServer(WSGIServer):
        # SO_REUSEPORT: several server processes bind the port and the kernel spreads
        # new connections over them (--processes), as a pre-forking server would.
        allow_reuse_port = True

    app = WSGIHandler()

    def timed(environ, start_response):
        started = time.perf_counter()

        def start(status, headers, exc_info=None):
            # Django calls start_response after the view and all middleware ran.
            elapsed = (time.perf_counter() - started) * 1000
            headers.append(("Server-Timing", f"app;dur={elapsed:.2f}"))
            return start_response(status, headers, exc_info)

        return app(environ, start)

    WSGIRequestHandler.log_message = lambda *a, **k: None  # no line per request
    run("127.0.0.1", port, timed, threading=True, server_cls=SharedPortServer)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_servers(port: int, log: Path, processes: int, into: list[subprocess.Popen]) -> None:
    """Start ``processes`` server processes sharing ``port`` (appended to ``into`` as they
    start, so the caller stops them even if a later one fails), each answering /healthz
    before the next starts."""
    for _ in range(processes):
        into.append(start_server(port, log))


def start_server(port: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise SystemExit("server did not answer /healthz within 60 s")


# -- one simulated rater -----------------------------------------------------------------


@dataclass
class Timing:
    kind: str
    server_ms: float | None
    client_ms: float
    status: int


@dataclass
class Rater:
    token: str
    seen: bool
    port: int
    rng: random.Random
    think: tuple[float, float]
    timings: list[Timing] = field(default_factory=list)
    # (assignment, instance) -> candidate index of the last acknowledged save
    choices: dict[tuple[int, int], int] = field(default_factory=dict)
    tags: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    flags: dict[int, bool] = field(default_factory=dict)
    submitted: set[int] = field(default_factory=set)
    replays: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    csrf: str = ""
    conn: http.client.HTTPConnection | None = None

    # HTTP ---------------------------------------------------------------------------
    def request(
        self, kind: str, method: str, path: str, data: dict | list | None = None, htmx=False
    ) -> tuple[int, str, str]:
        headers = {"Connection": "keep-alive"}
        if self.csrf:
            headers["Cookie"] = f"csrftoken={self.csrf}"
            headers["X-CSRFToken"] = self.csrf
        if htmx:
            headers["HX-Request"] = "true"
        body = None
        if data is not None:
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
                # A kept-alive connection the server closed between requests: only safe
                # to retry when nothing could have been processed (idempotent GET).
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
        timing = response.getheader("Server-Timing", "")
        server_ms = float(timing.split("dur=")[1]) if "dur=" in timing else None
        self.timings.append(Timing(kind, server_ms, client_ms, response.status))
        if response.status >= 500:
            self.errors.append(f"{method} {path}: {response.status}")
        return response.status, response.getheader("Location", ""), text

    def get_page(self, kind: str = "page") -> str:
        status, _, text = self.request(kind, "GET", f"/s/{self.token}/")
        if status != 200:
            raise RuntimeError(f"GET start: {status}")
        return text

    def post_form(self, kind: str, path: str, data: dict | list) -> tuple[int, str]:
        """A plain form POST; the rater pages answer every accepted one with a redirect."""
        status, location, text = self.request(kind, "POST", path, data)
        if status != 302:
            raise RuntimeError(f"{kind}: {status} {text[:200]!r}")
        return status, location

    def pause(self) -> None:
        time.sleep(self.rng.uniform(*self.think))

    # the rater's path ---------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        try:
            page = self.get_page()
            while not stop.is_set():
                if match := CONSENT_RE.search(page):
                    self.pause()
                    self.post_form("consent", match[1], {})
                elif match := FAMILIARITY_RE.search(page):
                    self.pause()
                    self.post_form("familiarity", match[1], {"seen": "yes" if self.seen else "no"})
                elif match := HISTORY_RE.search(page):
                    self.pause()
                    self.post_form("history", match[1], {})
                elif match := SUBMIT_RE.search(page):
                    if not self.scene(page, match[1], int(match[2]), stop):
                        break
                else:
                    break  # the final report: nothing left to do
                page = self.get_page()
        except Exception as exc:  # reported, not raised: the other raters go on
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            if self.conn is not None:
                self.conn.close()

    def scene(self, page: str, submit_path: str, assignment: int, stop: threading.Event) -> bool:
        save_path = submit_path.replace("/submit/", "/save/")
        speakers: dict[int, int] = Counter(int(i) for i, _ in CHOICE_RE.findall(page))
        tag_names = list(dict.fromkeys(t for _, t in TAG_RE.findall(page)))
        form: list[tuple[str, str]] = []
        for instance, candidates in speakers.items():
            if stop.is_set():
                return False
            self.pause()
            choice = self.rng.randrange(candidates)
            status, _, _ = self.request(
                "save", "POST", save_path, {f"choice-{instance}": choice}, htmx=True
            )
            if status != 200:
                raise RuntimeError(f"save choice: {status}")
            self.choices[(assignment, instance)] = choice
            form.append((f"choice-{instance}", str(choice)))
            form.append((f"tags-{instance}-sent", "1"))
            if self.rng.random() < 0.5:
                chosen = self.rng.sample(tag_names, k=self.rng.randint(1, 2))
                self.pause()
                fields = [(f"tags-{instance}", t) for t in chosen]
                status, _, _ = self.request(
                    "save-tags",
                    "POST",
                    save_path,
                    [*fields, (f"tags-{instance}-sent", "1")],
                    htmx=True,
                )
                if status != 200:
                    raise RuntimeError(f"save tags: {status}")
                self.tags[(assignment, instance)] = chosen
                form.extend(fields)
            else:
                self.tags.setdefault((assignment, instance), [])
        flag = self.rng.random() < 0.4
        self.pause()
        status, _, _ = self.request(
            "save-flag",
            "POST",
            save_path,
            # As the checkbox sends it: the value only when ticked.
            {"history_needed": "1", "history_needed-sent": "1"}
            if flag
            else {"history_needed-sent": "1"},
            htmx=True,
        )
        if status != 200:
            raise RuntimeError(f"save flag: {status}")
        self.flags[assignment] = flag
        form.append(("history_needed-sent", "1"))
        if flag:
            form.append(("history_needed", "1"))
        self.pause()
        self.post_form("submit", submit_path, form)
        self.submitted.add(assignment)
        if self.rng.random() < 0.05:  # a double click: the same submit again
            self.post_form("submit-replay", submit_path, form)
            self.replays["submit"] += 1
        if self.rng.random() < 0.05:  # a stale tab changing an answer after submit
            instance = next(iter(speakers))
            changed = (self.choices[(assignment, instance)] + 1) % speakers[instance]
            status, _, _ = self.request(
                "save-after-submit", "POST", save_path, {f"choice-{instance}": changed}, htmx=True
            )
            self.replays["save after submit"] += 1
            if status != 422:
                raise RuntimeError(f"save after submit answered {status}, not 422")
        return True


# -- set-up and checks -------------------------------------------------------------------


def ensure_database(url: str) -> None:
    """Create the database in ``url`` when it does not exist yet."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = parts._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created database {name}")


def import_works(copies: int, workdir: Path):
    from django.conf import settings
    from django.core.management import call_command

    from benchmarks.models import Work

    raw = Path(settings.TOMLAB_SHARED_DATA) / "tvshowguess" / "friends.raw"
    paths = [raw]
    for i in range(1, copies + 1):
        # copyfile, not copytree: the shared data is read-only and its mode must not follow.
        copy = workdir / f"{COPY_PREFIX}{i}.raw"
        shutil.copyfile(raw, copy)
        paths.append(copy)
    for path in paths:
        call_command("import_benchmark", "tvshowguess", str(path), verbosity=0)
    keys = [p.stem for p in paths]
    works = {w.key: w for w in Work.objects.filter(benchmark="tvshowguess", key__in=keys)}
    return [works[k] for k in keys]


def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"p50 {values[0]:.1f} ms (1 request)"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return (
        f"p50 {q[49]:6.1f}  p95 {q[94]:6.1f}  p99 {q[98]:6.1f}  max {max(values):6.1f} ms"
        f"  (n={len(values)})"
    )


def verify(study, raters: list[Rater]) -> list[str]:
    """Every acknowledged write is in the database exactly once; quotas hold."""
    from django.db.models import Count, Q

    from studies.models import Assignment, Guess

    problems: list[str] = []
    participants = {p.token: p.pk for p in study.participants.all()}
    assignments = {
        a.pk: a
        for a in Assignment.objects.filter(study_item__study=study).select_related("study_item")
    }
    guesses = defaultdict(list)
    for g in Guess.objects.filter(assignment__in=list(assignments)).select_related("instance"):
        guesses[(g.assignment_id, g.instance_id)].append(g)
    duplicated = {k: len(v) for k, v in guesses.items() if len(v) > 1}
    if duplicated:
        problems.append(f"{len(duplicated)} answers stored more than once")
    lost = wrong = foreign = 0
    for rater in raters:
        pid = participants[rater.token]
        for (assignment_id, instance_id), choice in rater.choices.items():
            assignment = assignments.get(assignment_id)
            if assignment is None or assignment.participant_id != pid:
                foreign += 1
                continue
            stored = guesses.get((assignment_id, instance_id))
            if not stored:
                lost += 1
                continue
            guess = stored[0]
            expected_tags = rater.tags.get((assignment_id, instance_id), [])
            if guess.answer != guess.instance.candidates[choice] or sorted(guess.tags) != sorted(
                expected_tags
            ):
                wrong += 1
        for assignment_id in rater.submitted:
            assignment = assignments[assignment_id]
            if assignment.status != "submitted":
                lost += 1
            elif assignment.history_needed is not rater.flags[assignment_id] or any(
                g.correct is None for g in assignment.guesses.all()
            ):
                wrong += 1  # the flag differs, or correctness was not computed
    acked_submits = {a for r in raters for a in r.submitted}
    unacked = [
        a.pk for a in assignments.values() if a.status == "submitted" and a.pk not in acked_submits
    ]
    if lost:
        problems.append(f"{lost} acknowledged answers or submits missing")
    if wrong:
        problems.append(f"{wrong} stored answers differ from what was acknowledged")
    if foreign:
        problems.append(f"{foreign} answers landed on another rater's assignment")
    if unacked:
        problems.append(f"{len(unacked)} scenes submitted that no rater saw acknowledged")
    pairs = Counter((a.participant_id, a.study_item_id) for a in assignments.values())
    if any(n > 1 for n in pairs.values()):
        problems.append("a rater got the same scene twice")
    over = study.study_items.annotate(
        n=Count("assignments"),
        seen=Count("assignments", filter=Q(assignments__seen=True)),
        unseen=Count("assignments", filter=Q(assignments__seen=False)),
    ).filter(
        Q(n__gt=study.overlap)
        | Q(seen__gt=study.overlap - study.min_unseen)
        | Q(unseen__gt=study.overlap - study.min_seen)
    )
    if over.exists():
        problems.append(f"{over.count()} scenes over their quota")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raters", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--copies", type=int, default=2, help="extra copies of Friends (2)")
    parser.add_argument("--think", type=float, nargs=2, default=(0.05, 0.4), metavar=("MIN", "MAX"))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--processes", type=int, default=1, help="server processes sharing the port (1)"
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    sys.path.insert(0, str(ROOT))
    if args.serve:
        serve(args.serve)
        return
    if not os.environ["DATABASE_URL"].startswith(("postgres://", "postgresql://")):
        raise SystemExit("the load check needs PostgreSQL: set DATABASE_URL=postgres://…")
    ensure_database(os.environ["DATABASE_URL"])

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from studies.models import Assignment, Guess, Study
    from studies.services import participants_invite, study_create, study_go_live

    workdir = Path(tempfile.mkdtemp(prefix="study-load-"))
    servers: list[subprocess.Popen] = []
    try:
        call_command("migrate", verbosity=0)
        Study.objects.filter(name__startswith=STUDY_PREFIX).delete()
        works = import_works(args.copies, workdir)
        quota = args.raters // 5
        study = study_create(
            name=f"{STUDY_PREFIX} {time.strftime('%Y-%m-%d %H:%M:%S')}",
            benchmark="tvshowguess",
            works=works,
            overlap=args.raters,  # room for every rater on every scene
            min_seen=quota,
            min_unseen=quota,
        )
        study = study_go_live(study=study)
        invited = participants_invite(
            study=study, labels=[f"load rater {i}" for i in range(args.raters)]
        )
        scenes = study.study_items.count()
        print(
            f"database: {connection.vendor} {connection.settings_dict['NAME']}; "
            f"{os.cpu_count()} CPUs; study {study.pk}: {len(works)} works, {scenes} scenes, "
            f"overlap {study.overlap} (seen >= {quota}, unseen >= {quota})"
        )
        connection.close()

        port = free_port()
        start_servers(port, workdir / "server.log", args.processes, servers)
        print(
            f"server: {args.processes} process(es) of Django's ThreadedWSGIServer "
            f"(runserver's) on :{port}; "
            f"{args.raters} raters for {args.seconds:.0f} s, think {args.think[0]}-"
            f"{args.think[1]} s"
        )
        master = random.Random(args.seed)
        raters = [
            Rater(
                token=p.token,
                seen=i % 2 == 0,
                port=port,
                rng=random.Random(master.random()),
                think=tuple(args.think),
            )
            for i, p in enumerate(invited)
        ]
        stop = threading.Event()
        threads = [threading.Thread(target=r.run, args=(stop,)) for r in raters]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
            time.sleep(0.02)  # a 1 s ramp: runserver's listen backlog is 10
        time.sleep(max(0.0, args.seconds - (time.perf_counter() - started)))
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
        elapsed = time.perf_counter() - started
        hung = sum(t.is_alive() for t in threads)
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=30)
        log = workdir / "server.log"
        server_log = log.read_text() if log.exists() else ""
        shutil.rmtree(workdir, ignore_errors=True)

    timings = [t for r in raters for t in r.timings]
    by_kind: dict[str, list[Timing]] = defaultdict(list)
    for t in timings:
        by_kind[t.kind].append(t)
    answers = len(by_kind["save"])
    submits = len(by_kind["submit"])
    print(
        f"\n{elapsed:.1f} s: {len(timings)} requests ({len(timings) / elapsed:.1f}/s), "
        f"{answers} answers saved ({answers / elapsed:.1f} answers/s), {submits} scenes "
        f"submitted ({submits / elapsed:.1f}/s), {len(by_kind['familiarity'])} familiarity "
        f"declarations"
    )
    replays = sum((r.replays for r in raters), Counter())
    print(f"replays: {dict(replays) or 'none'}")
    per_rater = sorted(len(r.submitted) for r in raters)
    print(
        f"scenes per rater: min {per_rater[0]}, "
        f"median {per_rater[len(per_rater) // 2]}, max {per_rater[-1]}"
    )
    print("\nserver time (Server-Timing: Django request cycle) per request kind:")
    answer_kinds = ("save", "save-tags", "save-flag", "submit")
    groups = [
        ("answer (all saves + submits)", [t for k in answer_kinds for t in by_kind[k]]),
        *[(k, by_kind[k]) for k in sorted(by_kind)],
    ]
    for name, rows in groups:
        print(f"  {name:30s} {percentiles([t.server_ms for t in rows if t.server_ms is not None])}")
    print("client-observed time (includes queueing in the server and the network stack):")
    for name, rows in groups[:1] + [g for g in groups if g[0] in ("save", "submit", "page")]:
        print(f"  {name:30s} {percentiles([t.client_ms for t in rows])}")
    statuses = Counter(t.status for t in timings)
    print(f"HTTP statuses: {dict(sorted(statuses.items()))}")

    errors = [e for r in raters for e in r.errors]
    problems = verify(study, raters)
    stored = Guess.objects.filter(assignment__study_item__study=study).count()
    done = Assignment.objects.filter(study_item__study=study, status="submitted").count()
    acked = sum(len(r.choices) for r in raters)
    print(
        f"\ndatabase: {stored} answers stored for {acked} acknowledged (assignment, speaker) "
        f"answers; {done} scenes submitted for {sum(len(r.submitted) for r in raters)} "
        f"acknowledged submits"
    )
    for e in errors[:10]:
        print(f"client error: {e}")
    if hung:
        problems.append(f"{hung} rater threads did not finish")
    if errors:
        problems.append(f"{len(errors)} client errors")
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems))
        if "Traceback" in server_log:
            print(server_log[-3000:])
        raise SystemExit(1)
    print("checks: zero lost or duplicated answers, no scene over quota, no server errors")


if __name__ == "__main__":
    main()
