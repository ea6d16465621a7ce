# `make run`: set up and run ToMLab on the embedded default (SQLite + Celery over
# kombu's filesystem broker + one worker), with the demo loaded.
# `make test`: the test suite (SQLite; set DATABASE_URL/CELERY_BROKER_URL for PostgreSQL + Redis).
# Debian's own python3.11 where it can make a venv (package python3.11-venv): it is
# built with profile-guided and link-time optimisation, and ran the suite's Python 8-10 %
# faster than an interpreter built from source without them (pyenv's default, first on
# PATH on these machines; docs/testing.md, "The interpreter"). Else the python3 on PATH;
# PYTHON=... chooses another.
PYTHON ?= $(shell /usr/bin/python3.11 -c "import ensurepip, venv" >/dev/null 2>&1 \
	&& echo /usr/bin/python3.11 || echo python3)
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000

.PHONY: run serve setup test lint fmt bench bench-llm bench-parser bench-baselines bench-load bench-allocation

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed
	$(PY) scripts/ensure_env.py
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py load_demo

run: setup
	PORT=$(PORT) $(PY) scripts/run_embedded.py

# The production web server (gunicorn, gthread workers; config/gunicorn_conf.py):
# WEB_WORKERS processes (default cores + 1) x WEB_THREADS threads (4) on BIND
# (127.0.0.1:$(PORT)); static files from whitenoise. No demo data and no Celery
# worker: start those yourself (`.venv/bin/celery -A config worker`).
serve: $(VENV)/.installed
	$(PY) scripts/ensure_env.py
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	PORT=$(PORT) $(VENV)/bin/gunicorn -c config/gunicorn_conf.py

# The suite runs in TEST_WORKERS pytest-xdist processes (default: one per core; each has
# its own database, data folder and broker keys: config/settings/test.py), work-stealing
# so that a long test does not hold back a worker's queue, and prints its 15 slowest
# tests at the end. `make test TEST_WORKERS=0` runs it in this one process.
TEST_WORKERS ?= $(shell nproc)

# PYTHONDONTWRITEBYTECODE is emptied for the run: where the environment sets it (these
# machines do), every process the suite starts (xdist workers, Celery workers, engine
# processes, manage.py commands) compiles the app from source again, and pytest rewrites
# the asserts of every test module again in each worker, about 10 s of CPU each.
test: $(VENV)/.installed
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -n $(TEST_WORKERS) $(if $(filter 0,$(TEST_WORKERS)),,--dist worksteal) --durations=15 $(PYTEST_ARGS)

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo --no-cache

fmt: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_dyntom_import.py
	$(PY) tests/benchmarks/bench_tombench_import.py

bench-llm: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_llm_throughput.py

bench-parser: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_screenplay_parser.py

bench-baselines: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_baseline_training.py --threads 1

bench-load: $(VENV)/.installed
	$(PY) tests/benchmarks/bench_study_load.py $(BENCH_ARGS)

bench-allocation: $(VENV)/.installed
	$(PY) scripts/bench_allocation.py $(BENCH_ARGS)
