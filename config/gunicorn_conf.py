"""gunicorn settings for `make serve`: the production web server.

gthread workers: each process serves several connections with threads and lets one
thread wait on PostgreSQL while another renders. Every value comes from the
environment: WEB_WORKERS (default CPU cores + 1), WEB_THREADS (4), BIND
(127.0.0.1:PORT, PORT 8000), WEB_TIMEOUT (30 s), WEB_KEEPALIVE (0 s). No access log
by default: rater URLs carry invite tokens (runserver's request lines go through our
redacting filter; gunicorn's access log would not).
https://docs.gunicorn.org/en/stable/settings.html
"""

import os

bind = os.environ.get("BIND", f"127.0.0.1:{os.environ.get('PORT', '8000')}")
# Cores + 1: each extra process costs CPU per request (its own caches and compiled
# queries, less shared cache); at 50 raters on 2 cores, 3 workers x 4 threads gave
# 130.5 and 120.8 scenes/s against 116.5 and 108.7 for 4 x 4, in alternating runs.
workers = int(os.environ.get("WEB_WORKERS") or (os.cpu_count() or 1) + 1)
worker_class = os.environ.get("WEB_WORKER_CLASS") or "gthread"
# gunicorn turns a sync worker with several threads into a gthread one.
threads = 1 if worker_class == "sync" else int(os.environ.get("WEB_THREADS") or 4)
# A gthread worker accepts connections while it has fewer than this open and queues
# them for its threads; 1,000 (gunicorn's default) lets one worker take a pile of
# requests while another idles. As many as it has threads leaves the rest waiting in
# the kernel's queue, first come first served, for whichever worker frees up first.
worker_connections = int(os.environ.get("WEB_CONNECTIONS") or threads)
timeout = int(os.environ.get("WEB_TIMEOUT") or 30)
graceful_timeout = timeout
# No keep-alive by default: behind the TLS proxy (which keeps the browsers'
# connections alive) every request is a new connection that whichever worker is free
# accepts. Kept alive, a connection stays with the worker that accepted it, and under
# load some workers queue many while others idle: the load check's p95 went from
# 0.70 s to 1.28 s with 5 s keep-alive at 50 raters.
keepalive = int(os.environ.get("WEB_KEEPALIVE") or 0)
# Each worker imports Django itself (no preload): a worker that dies comes back clean,
# and database connections are never shared across a fork.
preload_app = False
accesslog = None
errorlog = "-"
loglevel = os.environ.get("WEB_LOG_LEVEL", "warning")
wsgi_app = "config.wsgi:application"


def post_worker_init(worker) -> None:
    """Import the URLconf and compile the rater templates before the first request
    (``config.warmup``): otherwise the raters who open a study first pay for them."""
    from config.warmup import warm_up

    warm_up()
