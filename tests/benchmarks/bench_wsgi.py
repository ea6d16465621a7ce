"""The production WSGI app (config.wsgi) with per-request measurements, for the load check.

gunicorn serves it exactly as `make serve` serves ``config.wsgi:application`` (same
config file), plus one response header, ``X-Bench: <wall ms> <cpu ms> <queries>``:
the wall time and the thread's CPU time from WSGI entry to ``start_response``
(Django's whole request/response cycle, middleware included), and the SQL statements
Django sent (BEGIN and COMMIT are not statements Django sends; a request that
writes in a transaction has those two more). gthread workers run one request per
thread, so the thread's CPU clock is the request's.
"""

from __future__ import annotations

import time

from django.db import connections

from config.wsgi import application as django_app


def application(environ, start_response):
    started, cpu = time.perf_counter(), time.thread_time()
    queries = 0

    def count(execute, sql, params, many, context):
        nonlocal queries
        queries += 1
        return execute(sql, params, many, context)

    def start(status, headers, exc_info=None):
        wall = (time.perf_counter() - started) * 1000
        used = (time.thread_time() - cpu) * 1000
        headers.append(("X-Bench", f"{wall:.3f} {used:.3f} {queries}"))
        return start_response(status, headers, exc_info)

    with connections["default"].execute_wrapper(count):
        return django_app(environ, start)
