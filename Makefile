# The two commands: `make run` and `make test`. Everything else is a helper for them.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
MOCK_PORT ?= 9100
WORKERS ?= 1

.PHONY: run test setup migrate demo lint bench clean test-sqlite test-postgres

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

migrate: setup
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v 0

demo: migrate
	$(BIN)/python manage.py loadconfig config/demo.yaml
	$(BIN)/python manage.py ensureadmin

run: demo
	@$(BIN)/python manage.py mockupstream --host $(HOST) --port $(MOCK_PORT) & echo $$! > data/mock.pid
	@echo ""
	@echo "  Gateway:       http://$(HOST):$(PORT)"
	@echo "  Admin:         http://$(HOST):$(PORT)/admin/"
	@echo "  Capture viewer http://$(HOST):$(PORT)/captures/"
	@echo "  SDK base URL:  http://$(HOST):$(PORT)/v1"
	@echo "  Demo API key:  sk-demo-0001   (models: demo-chat, demo-responses, demo-messages, demo-gemini)"
	@echo "  Mock upstream: http://$(HOST):$(MOCK_PORT)"
	@echo ""
	@trap 'kill $$(cat data/mock.pid) 2>/dev/null' EXIT INT TERM; \
	GATEWAY_FETCH_ALLOW_PRIVATE=1 $(BIN)/uvicorn gateway.asgi:application --host $(HOST) --port $(PORT) --workers $(WORKERS) \
		--loop uvloop --http httptools --no-access-log --lifespan on

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache
