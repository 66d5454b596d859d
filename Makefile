# Projektor: `make run` serves the demo on SQLite; `make test` runs the whole suite.
# The venv's interpreter: the distribution's python3 where it can make a venv (Debian's
# and Ubuntu's are built with profile-guided and link-time optimisation, and a request
# costs the server up to a fifth less CPU on it than on a python3 compiled without them,
# as pyenv compiles by default: docs/speed.md), else the python3 on PATH. `make clean
# install` rebuilds the venv; PYTHON=... chooses another interpreter.
DISTRIBUTION_PYTHON := /usr/bin/python3
PYTHON ?= $(shell $(DISTRIBUTION_PYTHON) -c 'import ensurepip, sys; sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo $(DISTRIBUTION_PYTHON) || echo python3)
VENV := .venv
BIN := $(VENV)/bin
PG_TEST_URL ?= postgres://postgres@127.0.0.1:5432/projektor
TEST_ENV := SECRET_KEY=test-only-secret-key PROJEKTOR_SESSION_TTL_SECONDS=120

.PHONY: run key serve test test-sqlite test-postgres lint bench bench-fleet bench-claims bench-heatmap bench-runner bench-webhooks browser prometheus install clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/.installed

# The browser test drives Debian's chromium through its chromedriver (no download).
browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		echo "Installing chromium and chromium-driver for the browser test"; \
		apt-get install -y -qq chromium chromium-driver >/dev/null \
		|| { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }; \
	fi

# The Prometheus test scrapes a live server with Debian's prometheus (and its promtool).
prometheus:
	@if [ ! -x /usr/bin/prometheus ] || [ ! -x /usr/bin/promtool ]; then \
		echo "Installing prometheus for the metrics test"; \
		apt-get install -y -qq prometheus >/dev/null \
		|| { apt-get update -qq && apt-get install -y -qq prometheus >/dev/null; }; \
	fi

# The webhook worker and the demo fleet run beside the server and stop when it does
# (Ctrl-C included). The fleet: a few `projektor run --loop` runners with the scripted
# agent on a demo repository kept beside the database (made on the first run), and a
# reviewer (it waits for the server's /healthz). An agent idle for 90 s is shown
# stalled (the demo's threshold; 30 min by default). The server's one line per request
# is off. FLEET_ARGS: e.g. "--agents 6", "--work 5,20", or "-v2" for a line per action.
FLEET_ARGS ?=
DEMO_ENV := DEBUG=true PROJEKTOR_STALL_AFTER_SECONDS=90
run: install
	$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput
	$(DEMO_ENV) $(BIN)/python manage.py seed_demo
	$(DEMO_ENV) $(BIN)/python manage.py deliver_webhooks & worker=$$!; \
	$(DEMO_ENV) $(BIN)/python manage.py demo_fleet $(FLEET_ARGS) & fleet=$$!; \
	trap 'kill $$worker $$fleet 2>/dev/null; wait $$worker $$fleet' EXIT INT TERM; \
	$(DEMO_ENV) PROJEKTOR_LOG_REQUESTS=false $(BIN)/python manage.py runserver 127.0.0.1:8000

# An API key for workspace WS (made if missing) on make run's database (DATABASE_URL
# when set), printed alone: KEY=$$(make -s key WS=my-team). KEY_ARGS: more options of
# manage.py create_api_key, e.g. "--kind agent --agent coder-1" or "--expires 7d".
key: install
	@test -n "$(WS)" || { echo "Name the workspace: make key WS=my-team" >&2; exit 2; }
	@$(DEMO_ENV) $(BIN)/python manage.py migrate --noinput -v0
	@$(DEMO_ENV) $(BIN)/python manage.py create_api_key $(WS) $(KEY_ARGS)

# Production: on DATABASE_URL (SQLite by default), with SECRET_KEY, ALLOWED_HOSTS, ...
# set (docs/operations.md, "Serving it"). Every step, in this order: static files, migrations,
# then the servers; gunicorn reads gunicorn.conf.py and refuses to start on a failed check.
serve: install
	$(BIN)/python manage.py collectstatic --noinput -v0
	$(BIN)/python manage.py migrate --noinput
	@set -e; \
	$(BIN)/python manage.py deliver_webhooks & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker' EXIT INT TERM; \
	$(BIN)/gunicorn projektor.wsgi

lint: install
	$(BIN)/ruff check .
	$(TEST_ENV) $(BIN)/mypy .
	$(BIN)/lint-imports

# Each pass runs on every core (pytest-xdist), each worker on a test database of its
# own; the tests that must not meet run on one worker in turn (tests/conftest.py,
# XDIST_GROUPS). PYTEST_WORKERS=0 runs a pass in one process.
PYTEST_WORKERS ?= auto
PYTEST_ARGS := -n $(PYTEST_WORKERS) --dist loadgroup

test-sqlite: install browser prometheus
	$(TEST_ENV) $(BIN)/pytest -m "not postgres" $(PYTEST_ARGS)

# PostgreSQL pass: mandatory when CI=true; locally skipped with a notice if PostgreSQL is down.
# The tests marked ``alone`` (the races: up to 65 connections at once) run after the
# rest, in one process, so no other test's servers share PostgreSQL's connections.
test-postgres: install browser prometheus
	@if $(BIN)/python -c "import psycopg,sys; psycopg.connect('$(PG_TEST_URL)'.rsplit('/',1)[0]+'/postgres').close()" 2>/dev/null; then \
		$(TEST_ENV) DATABASE_URL=$(PG_TEST_URL) $(BIN)/pytest $(PYTEST_ARGS) -m "not alone" \
		&& $(TEST_ENV) DATABASE_URL=$(PG_TEST_URL) $(BIN)/pytest -n 0 -m alone; \
	elif [ "$$CI" = "true" ]; then \
		echo "CI=true but PostgreSQL is unreachable at $(PG_TEST_URL)"; exit 1; \
	else \
		echo "NOTICE: PostgreSQL unreachable at $(PG_TEST_URL); PostgreSQL tests NOT run"; \
	fi

# The two passes run at the same time: much of a pass waits (on live servers, git,
# subprocesses), and the other pass's tests fill those gaps. Each pass's output is
# printed whole when it ends. Installs first, one apt-get at a time, and the static
# files the live servers serve collected once, before either pass starts.
test: lint browser prometheus
	$(TEST_ENV) $(BIN)/python manage.py collectstatic --noinput -v0
	@$(MAKE) --no-print-directory -j2 --output-sync=target test-sqlite test-postgres

# The fleet bench: agents over HTTP against gunicorn, beside the database's own ceiling
# (manage.py bench). On DATABASE_URL when it is set (a PostgreSQL database it names is
# created if missing), else on a fresh scratch SQLite file. E.g. BENCH_ARGS=--quick,
# BENCH_ARGS="--agents 32 --json bench.json". The bench commands are benchmarks/'s: a
# checkout has them, the wheel does not.
BENCH_SQLITE := /tmp/projektor-bench.sqlite3
CREATE_PG_DB := import os, psycopg; from urllib.parse import urlsplit; \
	url = urlsplit(os.environ["DATABASE_URL"]); name = url.path.lstrip("/"); \
	server = psycopg.connect(url._replace(path="/postgres").geturl(), autocommit=True); \
	server.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() \
	or server.execute("CREATE DATABASE " + chr(34) + name + chr(34))
bench: install
	@if [ -n "$$DATABASE_URL" ]; then \
		case "$$DATABASE_URL" in postgres*) $(BIN)/python -c '$(CREATE_PG_DB)' || exit 1;; esac; \
		url="$$DATABASE_URL"; \
	else \
		rm -f $(BENCH_SQLITE) $(BENCH_SQLITE)-wal $(BENCH_SQLITE)-shm $(BENCH_SQLITE)-throttle*; \
		url="sqlite:///$(BENCH_SQLITE)"; \
	fi; \
	export DATABASE_URL="$$url" SECRET_KEY="$${SECRET_KEY:-bench-only-secret-key}"; \
	$(BIN)/python manage.py migrate -v0 && $(BIN)/python manage.py bench $(BENCH_ARGS) \
	&& $(BIN)/python manage.py bench_ready_graph && $(BIN)/python manage.py bench_resources

# The fleet experiment: runners with the workbench's scripted agent over a generated
# repository in three conditions side by side: uncoordinated, with claims, and with
# claims and the landing queue (docs/speed.md, "Does it prevent merge conflicts?"). Each condition on a fresh database beside DATABASE_URL's (PostgreSQL),
# else on scratch SQLite files. E.g. BENCH_FLEET_ARGS=--quick,
# BENCH_FLEET_ARGS="--runners 6 --issues 40 --json fleet.json".
BENCH_FLEET_ARGS ?=
bench-fleet: install
	SECRET_KEY="$${SECRET_KEY:-bench-only-secret-key}" \
	DATABASE_URL="$${DATABASE_URL:-sqlite:///$(BENCH_SQLITE)}" \
	$(BIN)/python manage.py bench_fleet $(BENCH_FLEET_ARGS)

# Claim throughput and latency in-process (no HTTP), on PostgreSQL (BENCH_URL) and on a
# scratch SQLite file.
BENCH_URL ?= $(PG_TEST_URL)
bench-claims: install
	-createdb -h 127.0.0.1 -U postgres projektor 2>/dev/null
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py bench_claims
	rm -f /tmp/projektor-bench.sqlite3*
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench.sqlite3 $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench.sqlite3 $(BIN)/python manage.py bench_claims

# The heatmap over 7, 30 and 90 days of a year of 10M conflicts, claims and events
# (HEATMAP_ARGS, e.g. "--rows 1000000"), on PostgreSQL and on SQLite.
bench-heatmap: install
	-createdb -h 127.0.0.1 -U postgres projektor 2>/dev/null
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py bench_heatmap $(HEATMAP_ARGS)
	rm -f /tmp/projektor-bench-heatmap.sqlite3*
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-heatmap.sqlite3 $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-heatmap.sqlite3 $(BIN)/python manage.py bench_heatmap $(HEATMAP_ARGS)

# A runner's own CPU while its agent works, beside the server's, on a scratch SQLite file.
bench-runner: install
	rm -f /tmp/projektor-bench-runner.sqlite3*
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-runner.sqlite3 $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-runner.sqlite3 $(BIN)/python manage.py bench_runner

# Webhook deliveries per second to a local receiver, on PostgreSQL and on SQLite.
bench-webhooks: install
	-createdb -h 127.0.0.1 -U postgres projektor 2>/dev/null
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=$(BENCH_URL) $(BIN)/python manage.py bench_webhooks
	rm -f /tmp/projektor-bench-webhooks.sqlite3*
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-webhooks.sqlite3 $(BIN)/python manage.py migrate -v0
	$(TEST_ENV) DATABASE_URL=sqlite:////tmp/projektor-bench-webhooks.sqlite3 $(BIN)/python manage.py bench_webhooks

clean:
	rm -rf $(VENV) staticfiles .pytest_cache .mypy_cache .ruff_cache
