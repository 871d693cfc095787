# `make run`: set up and start web, worker and beat on embedded defaults.
# `make test`: set up and run the whole test suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# The demo bot's events go to examples/echo_bot.py on this port (the
# Procfile's demo_bot, which `make run` starts with the rest).
export ECHO_BOT_PORT ?= 8100
DATA_DIR ?= var
export DATA_DIR
export PUBLIC_BASE_URL ?= http://127.0.0.1:$(PORT)

.PHONY: run test test-clients test-schema setup lint check bench clean webchat openapi docs docs-build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(VENV)/.installed

run: setup
	$(BIN)/python manage.py migrate --no-input -v 0
	# The first run seeds the demo and keeps it in demo.json; later runs reuse it
	# (RESEED=1 seeds a new one).
	$(BIN)/python manage.py seed_demo --save $(DATA_DIR)/demo.json --webhook-url http://127.0.0.1:$(ECHO_BOT_PORT)/ $(if $(RESEED),--fresh)
	$(BIN)/python manage.py demo_banner $(DATA_DIR)/demo.json
	# Metrics count from the service's start (docs/operating/metrics-logs.md).
	rm -rf "$${PROMETHEUS_MULTIPROC_DIR:-$(DATA_DIR)/metrics}"
	PORT=$(PORT) $(BIN)/python -m platform_site.procfile_runner -f platform_site/Procfile

# PYTEST_ARGS narrows the run, e.g. PYTEST_ARGS="-m integration tests/test_delivery_faults.py".
# The suite runs in TEST_PROCESSES pytest-xdist processes (0 runs it in this
# one), each with a DATA_DIR and a test database of its own
# (tests/xdist_data_dir.py), a test file's tests together in one of them.
# Two a core: half of the suite's time is spent waiting on the workers and
# servers its tests start, so one a core left the cores idle half the time
# (on 2 cores, one run after the other: 285 s with 2 processes, 217 s with 4;
# BENCHMARKS.md §24).
TEST_PROCESSES ?= $(shell echo $$(( 2 * $$(getconf _NPROCESSORS_ONLN) )))
test: setup
	$(BIN)/python -m pytest -p tests.xdist_data_dir -n $(TEST_PROCESSES) --dist loadfile $(PYTEST_ARGS)

# The official npm clients, and a bot written with the official SDK
# (examples/sdk_bot), against a live service (web, worker, beat) on a fresh
# PostgreSQL database and Redis: needs Node 20 and npm. LIVE_PORT, DATABASE_URL
# and CELERY_BROKER_URL change where it runs (defaults in .ci/with-live-server);
# its seed and log go to LIVE_DATA_DIR, away from what `make run` writes.
LIVE_DATA_DIR ?= $(DATA_DIR)/live
test-clients: setup
	cd clients && npm ci --no-audit --no-fund
	cd examples/sdk_bot && npm ci --no-audit --no-fund
	DATA_DIR=$(LIVE_DATA_DIR) .ci/with-live-server node clients/run.mjs

# The OpenAPI document (/v1/openapi.json) against a live service, as above:
# schemathesis on every operation, valid and invalid data, every check.
test-schema: setup
	DATA_DIR=$(LIVE_DATA_DIR) .ci/with-live-server .ci/schemathesis

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy .
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --file $(DATA_DIR)/openapi.yaml
	@cmp -s $(DATA_DIR)/openapi.yaml docs/api/openapi.yaml \
	  || { echo "docs/api/openapi.yaml differs from what the code describes: run make openapi" >&2; exit 1; }

# The OpenAPI document the docs' API reference is rendered from, written anew.
openapi: setup
	$(BIN)/python manage.py spectacular --validate --fail-on-warn --file docs/api/openapi.yaml

# The documentation site (docs/, mkdocs.yml): served with live reload on
# DOCS_PORT, or built (strict: a broken link or anchor fails) into var/site.
DOCS_PORT ?= 8001
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

docs-build: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

check: lint test

# The Botpress webchat bundled into chat/static/webchat/ (committed:
# the service serves it without Node). Needs Node 20 and npm; the same lock
# gives byte-identical files, which .ci/webchat-bundle checks.
webchat:
	cd webchat && npm ci --no-audit --no-fund && node build.mjs

bench: setup
	bash bench/run_all.sh

clean:
	rm -rf $(VENV) $(DATA_DIR)
