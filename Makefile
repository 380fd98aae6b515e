# The two commands: `make run` and `make test`. Everything else is a helper for them.
# Python 3.11 is required (pyproject.toml); PY names another interpreter of that version.
PY ?= $(shell command -v python3.11 2>/dev/null || echo python3.11)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
MOCK_PORT ?= 9100
WORKERS ?= 1
# On SIGTERM, in-flight requests and streams may run this long (GATEWAY_SHUTDOWN_GRACE_SECONDS knob).
GRACE ?= $(or $(GATEWAY_SHUTDOWN_GRACE_SECONDS),30)

.PHONY: run test test-fast test-postgres test-resilience lock setup sysdeps migrate demo lint bench clean

$(BIN)/python:
	@$(PY) -c 'import sys; assert sys.version_info[:2] == (3, 11)' 2>/dev/null || \
		{ echo "Python 3.11 is required: install it or run make PY=/path/to/python3.11"; exit 1; }
	$(PY) -m venv $(VENV) || { rm -rf $(VENV); exit 1; }

# A failed install removes the venv, so the next make starts clean instead of on a half-built one.
# The example transform plug-in is installed too: its tests and the plug-in e2e test need it.
# requirements.lock pins every dependency (make lock rewrites it from pyproject.toml); installing
# the project afterwards adds anything pyproject.toml names that the lock does not yet.
$(STAMP): $(BIN)/python pyproject.toml requirements.lock examples/monogate-redact/pyproject.toml
	{ $(BIN)/pip install -q --upgrade pip && $(BIN)/pip install -q -r requirements.lock \
		&& $(BIN)/pip install -q -e '.[dev]' \
		&& $(BIN)/pip install -q -e examples/monogate-redact; } || { rm -rf $(VENV); exit 1; }
	touch $(STAMP)

lock: setup
	$(BIN)/pip install -q uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 --no-header -q -o requirements.lock

setup: $(STAMP)

# Chromium, Node/npm, Redis, PostgreSQL: installed as root when missing (tools/system-deps.sh).
sysdeps:
	@bash tools/system-deps.sh

migrate: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0

# make demo (re)applies config/demo.yaml; make run loads it only into an empty database.
demo: migrate
	MOCK_PORT=$(MOCK_PORT) $(BIN)/python manage.py loadconfig config/demo.yaml
	$(BIN)/python manage.py ensureadmin

run: migrate
	MOCK_PORT=$(MOCK_PORT) $(BIN)/python manage.py loadconfig --if-empty config/demo.yaml
	$(BIN)/python manage.py ensureadmin
	@$(BIN)/python manage.py mockupstream --host $(HOST) --port $(MOCK_PORT) & echo $$! > data/mock.pid
	@# The gateway is ready in about a second and the mock later: a first request in between failed
	@# (and a second one opened the demo channel's breaker for a minute).
	@$(BIN)/python tools/wait_for_port.py $(HOST) $(MOCK_PORT)
	@echo ""
	@echo "  Gateway:       http://$(HOST):$(PORT)"
	@echo "  Admin:         http://$(HOST):$(PORT)/admin/"
	@echo "  Capture viewer http://$(HOST):$(PORT)/captures/"
	@echo "  SDK base URL:  http://$(HOST):$(PORT)/v1"
	@echo "  Demo API key:  sk-demo-0001   (models: demo-chat, demo-responses, demo-messages, demo-gemini, demo-image)"
	@echo "  Mock upstream: http://$(HOST):$(MOCK_PORT)"
	@echo ""
	@rm -rf data/prometheus && mkdir -p data/prometheus
	@# No access log (the launcher's default): the gateway logs its own line per /v1 request (logger gateway.access;
	@# GATEWAY_LOG_FORMAT=json for JSON). PROMETHEUS_MULTIPROC_DIR: /metrics sums every worker.
	@# gateway.launch: uvicorn workers (uvloop, the guarded httptools protocol, keep-alive 5 s, lifespan
	@# on, no access log), each on its own SO_REUSEPORT socket so the kernel spreads connections evenly
	@# (issue 20; bench/SERVERS.md compares it with uvicorn --workers and granian). No comment line
	@# may sit inside the continued command below: the shell would read it as words.
	@trap 'kill $$(cat data/mock.pid) 2>/dev/null' EXIT INT TERM; \
	GATEWAY_SECURE_COOKIES=$${GATEWAY_SECURE_COOKIES:-0} PROMETHEUS_MULTIPROC_DIR=$(CURDIR)/data/prometheus GATEWAY_FETCH_ALLOW_PRIVATE=1 $(BIN)/python -m gateway.launch --host $(HOST) --port $(PORT) --workers $(WORKERS) \
		--timeout-graceful-shutdown $(GRACE)

# Two pytest-xdist workers (one per core); each has its own Redis databases (tests/conftest.py),
# and the agent CLIs stay on one worker.
test: setup sysdeps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup $(PYTEST_ARGS)

test-postgres: setup
	DATABASE_URL=$${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/gateway_test} $(BIN)/python -m pytest -q $(PYTEST_ARGS)

# The scale-out topology (two instances x two workers behind a balancer, PostgreSQL, Redis, a
# Celery worker) and its fault runs (30 s Redis and PostgreSQL outages, 2,000-connection churn); bounded (3-5 min). Figures go to tests/resilience/RESULTS.md.
test-resilience: setup
	GATEWAY_RESILIENCE=1 $(BIN)/python -m pytest -q -p no:randomly tests/resilience $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -q -m unit -n 2 $(PYTEST_ARGS)

# ruff (lint and format), mypy held to its baseline (tools/mypy_ratchet.py), the published config
# schema current.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/mypy_ratchet.py
	$(BIN)/python manage.py configschema --check

bench: setup
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache
