"""Recording replies: a reply is made durable as its RunCall row before it counts, then
parsed into predictions, cached and marked done, in bulk. Also the cost estimate and
the budget both the executor and direct calls keep.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from ..backends import BackendError, ChatRequest, ChatResult
from ..backends.secrets import mask_secrets
from ..models import Backend, CachedResponse, Prediction, Run, RunCall
from ..pipelines import CallUnit, Pipeline

# Sampling parameters sent to backends; everything else in Run.params is engine-only.
_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")
# Run.params key of a run that sends every call again ("send again, do not use the
# cache"): no reply is taken from the cache, and each fresh reply replaces the cache
# row of its request, so a later run that uses the cache gets the newest reply.
NO_CACHE = "no_cache"
# Progress hooks and the run's counters are refreshed at most this often: a query and
# a redraw per reply would cost the request window its refills at high concurrency.
PROGRESS_INTERVAL_S = 0.25

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunProgress:
    """What a progress hook receives: counts as of the last write."""

    run_id: int
    total: int
    done: int
    errors: int


ProgressHook = Callable[[RunProgress], None]


# --- recording replies -------------------------------------------------------------------


def sends_again(run: Run) -> bool:
    """Whether ``run`` asks every call afresh (see :data:`NO_CACHE`)."""
    return bool((run.params or {}).get(NO_CACHE))


def _cost(backend: Backend, prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (
        Decimal(prompt_tokens) * backend.price_input_per_1k
        + Decimal(completion_tokens) * backend.price_output_per_1k
    ) / Decimal(1000)


def _request_for(
    run: Run, unit: CallUnit, sample_index: int, overrides: dict[str, Any] | None = None
) -> ChatRequest:
    params = {k: run.params[k] for k in _SAMPLING_KEYS if k in run.params}
    params.update({k: v for k, v in (overrides or {}).items() if k in _SAMPLING_KEYS})
    if params.get("seed") is not None:
        # One seed for every sample would make "3 samples" one sample three times.
        params["seed"] = int(params["seed"]) + sample_index
    return ChatRequest.build(
        unit.messages, model=run.model, params=params, sample_index=sample_index
    )


class RequestCodec:
    """Cache keys and cache-row JSON for requests that share their messages, fast.

    :meth:`ChatRequest.cache_key` serialises and hashes the whole request (~0.2 ms for a
    stage-sized prompt) and the cache row serialises it again; with samples, every
    sample repeats that work on the same messages. Here the messages are serialised
    once per prompt, the hash of everything up to them is computed once, and each
    request adds only its own tail. The bytes are those of ``json.dumps(...,
    sort_keys=True)``: sorted keys put ``backend`` < ``messages`` < ``model`` <
    ``params`` < ``sample_index``, so the keys equal ``ChatRequest.cache_key`` (tested).
    """

    def __init__(self, backend_name: str) -> None:
        self.backend_name = backend_name
        self._prefixes: dict[tuple, tuple[str, Any]] = {}

    def _prefix(self, request: ChatRequest) -> tuple[str, Any]:
        entry = self._prefixes.get(request.messages)
        if entry is None:
            messages = json.dumps(request.message_dicts, sort_keys=True)
            head = f'{{"backend": {json.dumps(self.backend_name)}, "messages": {messages}'
            entry = (messages, hashlib.sha256(head.encode()))
            self._prefixes[request.messages] = entry
        return entry

    @staticmethod
    def _tail(request: ChatRequest) -> str:
        return (
            f', "model": {json.dumps(request.model)}'
            f', "params": {json.dumps(request.param_dict, sort_keys=True)}'
            f', "sample_index": {json.dumps(request.sample_index)}}}'
        )

    def cache_key(self, request: ChatRequest) -> str:
        digest = self._prefix(request)[1].copy()
        digest.update(self._tail(request).encode())
        return digest.hexdigest()

    def request_json(self, request: ChatRequest) -> str:
        """``request.as_json()`` serialised, as the cache row stores it."""
        return f'{{"messages": {self._prefix(request)[0]}{self._tail(request)}'


@dataclass
class _Outcome:
    """A call's reply (or error) on its way from a request thread to the database."""

    call: RunCall
    result: ChatResult | BackendError
    from_cache: bool = False
    cost: Decimal = Decimal(0)


class _Recorder:
    """Writes replies for one run, on the thread that owns the run's connection.

    :meth:`store_received` is the durability step: one row per reply (the call turns
    ``received`` and holds the reply), in one short transaction for all replies that
    arrived together. :meth:`record` then parses, writes the predictions in bulk, the
    cache rows and the "done" marks, and bumps the run's counters once per batch.
    """

    def __init__(
        self,
        *,
        run: Run,
        pipeline: Pipeline,
        units: dict[str, CallUnit],
        requests: dict[int, ChatRequest],
        on_progress: ProgressHook | None,
    ) -> None:
        self.run = run
        self.pipeline = pipeline
        self.units = units
        self.requests = requests
        self.codec = RequestCodec(run.backend.name)
        self.cache_keys = {pk: self.codec.cache_key(r) for pk, r in requests.items()}
        self.on_progress = on_progress
        self.template_version = (
            f"{run.template.name} v{run.template.version}" if run.template else ""
        )
        self.total = 0
        self.done = 0
        self.errors = 0
        self._progress_at = 0.0
        self._sql, self._constant_values = self._statements()

    # -- durability ------------------------------------------------------------------

    def add(self, units: dict[str, CallUnit], requests: dict[int, ChatRequest]) -> None:
        """More units and call requests to record replies for (the engine prepares a
        run's calls a few units at a time)."""
        self.units.update(units)
        self.requests.update(requests)
        self.cache_keys.update((pk, self.codec.cache_key(r)) for pk, r in requests.items())

    def store_received(self, outcomes: list[_Outcome]) -> None:
        """Make replies durable: one UPDATE of each call row, one transaction for all."""
        rows = []
        for outcome in outcomes:
            result = outcome.result
            if isinstance(result, BackendError):
                continue
            rows.append(
                (
                    RunCall.Status.RECEIVED,
                    self.cache_keys[outcome.call.pk],
                    outcome.from_cache,
                    result.text,
                    result.finish_reason[:30],
                    result.prompt_tokens,
                    result.completion_tokens,
                    connection.ops.adapt_decimalfield_value(outcome.cost, 12, 6),
                    result.latency_ms,
                    outcome.call.pk,
                    RunCall.Status.DONE,
                )
            )
        if not rows:
            return
        table = connection.ops.quote_name(RunCall._meta.db_table)
        sql = (
            f"UPDATE {table} SET status = %s, cache_key = %s, from_cache = %s, "
            "raw_output = %s, finish_reason = %s, prompt_tokens = %s, completion_tokens = %s, "
            "cost = %s, latency_ms = %s, error = '' WHERE id = %s AND status <> %s"
        )
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, rows)

    # -- predictions -----------------------------------------------------------------

    def _statements(self) -> tuple[dict[str, str], dict[str, Any]]:
        """The SQL :meth:`record` runs, and the values every prediction row shares.

        Predictions go in through one INSERT, bypassing model instances (they cost
        ~20 us each, a third of the write at 71 predictions a call); duplicates are
        skipped, as unique constraints guard every item of a run.
        """
        quote = connection.ops.quote_name

        def insert(model: type, columns: list[str], casts: dict[str, str] | None = None) -> str:
            values = ", ".join("%s" + (casts or {}).get(c, "") for c in columns)
            return (
                f"INSERT INTO {quote(model._meta.db_table)} "
                f"({', '.join(quote(c) for c in columns)}) "
                f"VALUES ({values}) ON CONFLICT DO NOTHING"
            )

        meta = Prediction._meta
        item_column = meta.get_field(self.pipeline.item_field).column
        prediction_columns = [
            "run_id",
            "call_id",
            "sample_index",
            item_column,
            "raw_output",
            "parsed_answer",
            "parse_status",
            "correct",
            "details",
            "template_version",
            "model",
            "params",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        ]
        cache_columns = [
            "key",
            "backend_name",
            "model",
            "request",
            "text",
            "finish_reason",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "created_at",
        ]
        calls, runs = quote(RunCall._meta.db_table), quote(Run._meta.db_table)
        # The request arrives as JSON text (see RequestCodec); PostgreSQL casts it.
        cache = insert(
            CachedResponse,
            cache_columns,
            {"request": "::jsonb"} if connection.vendor == "postgresql" else None,
        )
        if sends_again(self.run):
            # The fresh reply replaces the one cached before (both databases' upsert).
            updated = ", ".join(
                f"{quote(c)} = excluded.{quote(c)}" for c in cache_columns if c != "key"
            )
            cache = cache.replace(
                "ON CONFLICT DO NOTHING", f"ON CONFLICT ({quote('key')}) DO UPDATE SET {updated}"
            )
        sql = {
            "prediction": insert(Prediction, prediction_columns),
            "cache": cache,
            # %%s: the id list's placeholders are filled in per batch.
            "done": f"UPDATE {calls} SET status = %%s, finished_at = %%s "
            "WHERE status = %%s AND id IN (%s) RETURNING id",
            "counters": f"UPDATE {runs} SET done_calls = done_calls + %s, "
            "error_calls = error_calls + %s, prompt_tokens = prompt_tokens + %s, "
            "completion_tokens = completion_tokens + %s, cost = cost + %s WHERE id = %s",
        }
        if connection.vendor == "sqlite":
            # One statement per batch, the rows as one JSON array that SQLite unpacks
            # itself: executemany binds each row holding the GIL and steps it without,
            # so the writer queued for the GIL 72 times a call behind 128 request
            # threads. Here the insert runs in one step, the GIL released throughout.
            values = ", ".join(
                f"json_extract(value, '$[{i}]')" for i in range(len(prediction_columns))
            )
            sql["prediction"] = (
                f"INSERT INTO {quote(meta.db_table)} "
                f"({', '.join(quote(c) for c in prediction_columns)}) "
                # WHERE true: SQLite's parser needs it before ON CONFLICT after a SELECT.
                f"SELECT {values} FROM json_each(%s) WHERE true ON CONFLICT DO NOTHING"
            )
        elif connection.vendor == "postgresql":
            # COPY: several times faster than even a pipelined executemany, whose
            # client-side quoting of ~17 values per row held the GIL the request
            # threads need. COPY has no ON CONFLICT; :meth:`record` only writes the
            # predictions of calls it has just turned done, so none can be there yet.
            sql["prediction"] = (
                f"COPY {quote(meta.db_table)} ({', '.join(quote(c) for c in prediction_columns)}) "
                "FROM STDIN"
            )
        # JSON goes in as text, serialised once where every row shares it (as
        # JSONField would: json.dumps with its default encoder).
        constant = {"params": json.dumps(self.run.params), "empty_details": "{}"}
        return sql, constant

    def _prediction_rows(self, outcome: _Outcome, now: Any) -> list[tuple]:
        call, result = outcome.call, outcome.result
        parsed = self.pipeline.parse(unit=self.units[call.unit_key], text=result.text)
        share = max(1, len(parsed))
        empty = self._constant_values["empty_details"]
        params = self._constant_values["params"]
        prompt_tokens = result.prompt_tokens // share
        completion_tokens = result.completion_tokens // share
        run_id, call_id, sample_index = self.run.pk, call.pk, call.sample_index
        return [
            (
                run_id,
                call_id,
                sample_index,
                item.item_id,
                # The reply is stored once, on the call (see Prediction.raw_output).
                "",
                item.parsed_answer,
                item.parse_status,
                item.correct,
                json.dumps(item.details) if item.details else empty,
                self.template_version,
                self.run.model,
                params,
                prompt_tokens,
                completion_tokens,
                result.latency_ms,
                now,
            )
            for item in parsed
        ]

    def record(self, outcomes: list[_Outcome]) -> None:
        """Parse the replies, write predictions, cache rows and done/error marks at once.

        Plain SQL with statements built once: Django's bulk_create and update compile
        their SQL on every call (~1-4 ms each), which at a hundred replies a second
        would eat the time the request threads need.
        """
        if not outcomes:
            return
        ops = connection.ops
        now = timezone.now()
        now_db = ops.adapt_datetimefield_value(now)
        rows: dict[int, list[tuple]] = {}
        cache_rows: list[tuple] = []
        errors: list[_Outcome] = []
        usage: dict[int, tuple[int, int, Decimal]] = {}
        for outcome in outcomes:
            result = outcome.result
            if isinstance(result, BackendError):
                errors.append(outcome)
                continue
            # Parsed before the transaction, which then holds the write lock briefly.
            rows[outcome.call.pk] = self._prediction_rows(outcome, now_db)
            usage[outcome.call.pk] = (result.prompt_tokens, result.completion_tokens, outcome.cost)
            if not outcome.from_cache:
                request = self.requests[outcome.call.pk]
                cache_rows.append(
                    (
                        self.cache_keys[outcome.call.pk],
                        self.run.backend.name,
                        self.run.model,
                        self.codec.request_json(request),
                        result.text,
                        result.finish_reason[:30],
                        result.prompt_tokens,
                        result.completion_tokens,
                        result.latency_ms,
                        now_db,
                    )
                )
        sql = self._sql
        done = 0
        with transaction.atomic(), connection.cursor() as cursor:
            done_ids: list[int] = []
            if rows:
                # Only calls this transaction turns done get predictions: a call
                # recorded already (by an earlier attempt) is skipped whole.
                cursor.execute(
                    sql["done"] % ", ".join(["%s"] * len(rows)),
                    [RunCall.Status.DONE, now_db, RunCall.Status.RECEIVED, *rows],
                )
                done_ids = [pk for (pk,) in cursor.fetchall()]
                done = len(done_ids)
            new_rows = [row for pk in done_ids for row in rows[pk]]
            if new_rows and connection.vendor == "postgresql":
                with cursor.cursor.copy(sql["prediction"]) as copy:
                    for row in new_rows:
                        copy.write_row(row)
            elif new_rows and connection.vendor == "sqlite":
                cursor.execute(sql["prediction"], [json.dumps(new_rows)])
            elif new_rows:
                cursor.executemany(sql["prediction"], new_rows)
            if cache_rows:
                # A concurrent run may have paid for the same request first: keep its row
                # (unless this run sends again: then the newest reply wins).
                cursor.executemany(sql["cache"], cache_rows)
            for outcome in errors:
                RunCall.objects.filter(pk=outcome.call.pk).exclude(
                    status=RunCall.Status.DONE
                ).update(
                    status=RunCall.Status.ERROR,
                    # Masked by the backend already; again here, for any error text
                    # that reached the recorder another way.
                    error=mask_secrets(str(outcome.result))[:2000],
                    finished_at=now,
                )
                logger.warning(
                    "run %s call %s failed: %s",
                    self.run.pk,
                    outcome.call.unit_key,
                    mask_secrets(str(outcome.result)),
                )
            if done or errors:
                # Cached calls cost nothing now; tokens still count, as the run used them.
                cursor.execute(
                    sql["counters"],
                    [
                        done,
                        len(errors),
                        sum(usage[pk][0] for pk in done_ids),
                        sum(usage[pk][1] for pk in done_ids),
                        ops.adapt_decimalfield_value(
                            sum((usage[pk][2] for pk in done_ids), Decimal(0)), 12, 6
                        ),
                        self.run.pk,
                    ],
                )
        self.done += done
        self.errors += len(errors)
        self.progress()

    def progress(self, *, force: bool = False) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        if force or now - self._progress_at >= PROGRESS_INTERVAL_S:
            self._progress_at = now
            self.on_progress(RunProgress(self.run.pk, self.total, self.done, self.errors))


def _estimate(run: Run, request: ChatRequest) -> tuple[int, Decimal]:
    """Tokens and cost a call may use: its prompt plus, when capped, the longest reply."""
    prompt = request.estimated_prompt_tokens()
    completion = int(run.params.get("max_tokens") or 0)
    return prompt + completion, _cost(run.backend, prompt, completion)


class _Budget:
    """Tokens and cost used and reserved (by calls in flight); shared by request threads."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.used_tokens = run.prompt_tokens + run.completion_tokens
        self.used_cost = run.cost
        self.reserved_tokens = 0
        self.reserved_cost = Decimal(0)

    def would_exceed(self, tokens: int, cost: Decimal) -> bool:
        """True when reserving ``tokens``/``cost`` more could break the run's budget."""
        run = self.run
        if (
            run.budget_tokens is not None
            and self.used_tokens + self.reserved_tokens + tokens > run.budget_tokens
        ):
            return True
        return (
            run.budget_cost is not None
            and self.used_cost + self.reserved_cost + cost > run.budget_cost
        )
