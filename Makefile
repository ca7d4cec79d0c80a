SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV := .venv
BIN  := $(VENV)/bin

.PHONY: help setup setup-run setup-nodeps run test lint _lint docs _docs screenshots _screenshots \
	bench chaos lock clean

help:
	@echo "make setup   - venv, PostgreSQL, Redis, NATS, demo gateway.toml, migrations, wrk, promtool, chromium, podman, helm"
	@echo "make run     - setup without wrk/promtool, then run the gateway (serve, settle, console, run-jobs, currency-stub)"
	@echo "make test    - setup, then ruff, ruff format --check, mypy, the console screenshots (into .data/), the docs site, pytest in 4 xdist processes (TEST_WORKERS=0: one)"
	@echo "make docs    - build the documentation site into site/ (mkdocs, strict; the committed screenshots)"
	@echo "make screenshots - setup, then the console's screenshots into docs/images/console/ (headless chromium)"
	@echo "make lint    - ruff, ruff format --check, mypy (no services needed)"
	@echo "make bench   - setup, then python -m bench.run"
	@echo "make chaos   - setup, then pytest chaos"
	@echo "make lock    - re-pin requirements.lock / requirements-dev.lock (needs uv; LOCK_ARGS=--upgrade)"
	@echo "make clean   - stop the repo's own NATS (if started here), remove .venv .data site/ caches node_modules"

setup:
	bash scripts/setup.sh

# venv only: no services, tools or migrations
setup-nodeps:
	SETUP_SKIP_SERVICES=1 bash scripts/setup.sh

# what running needs: no benchmark or alert-rule tools (wrk, promtool)
setup-run:
	SETUP_SKIP_TOOLS=1 bash scripts/setup.sh

run: setup-run
	exec bash scripts/run.sh

_lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

lint: setup-nodeps
	$(MAKE) --no-print-directory _lint

# The site's pages under docs/reference/ are generated from the code; a unit test fails
# when they are stale (`python -m gateway.devtools.docs_reference` rewrites them).
# NO_MKDOCS_2_WARNING: the theme's end-of-life banner, printed on every build.
_docs:
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs: setup-nodeps
	$(MAKE) --no-print-directory _docs

# The console's pages in headless Chromium (empty, typical, 10,000+ rows), for the docs.
# They need PostgreSQL, NATS and chromium, so `make docs` (no services) builds with the
# committed images; `make screenshots` retakes them into docs/images/console/, and
# `make test` takes them into .data/ (so that the script is proven on every run without
# leaving 35 changed images behind).
SHOTS_DIR ?= docs/images/console
_screenshots:
	$(BIN)/python -m tests.browser.screenshots $(SHOTS_DIR)

screenshots: setup
	$(MAKE) --no-print-directory _screenshots

# The suite runs in TEST_WORKERS pytest-xdist processes (most tests wait on PostgreSQL,
# NATS, subprocesses and timers), one test module per unit of work, the chaos scenarios
# one unit and the container-image modules one unit, the long kinds handed out first
# (conftest.py); every port, database, Redis database and directory a test takes is its
# worker's own (tests/support/services.py, conftest.py). TEST_WORKERS=0: one process.
# Then the tests marked `alone` (they judge answer times against a baseline of the same
# run, which other workers' changing load would skew) run by themselves.
# A test hung for 10 min writes every thread's stack (`faulthandler_timeout`).
TEST_WORKERS ?= 4
PYTEST_ARGS ?= -q -n $(TEST_WORKERS) --dist loadfile --durations=30

# The deployment tests (tests/integration/deploy/: the image, compose, the Helm chart)
# fail rather than skip when a container tool is missing: the set-up installed them.
test: setup
	$(MAKE) --no-print-directory _lint
	$(MAKE) --no-print-directory _screenshots SHOTS_DIR=.data/screenshots
	$(MAKE) --no-print-directory _docs
	GATEWAY_REQUIRE_CONTAINERS=1 $(BIN)/pytest $(PYTEST_ARGS) -m "not alone"
	$(BIN)/pytest -q --durations=5 -m alone

bench: setup
	$(BIN)/python -m bench.run

chaos: setup
	CHAOS_FULL=1 $(BIN)/pytest -q chaos

# Pinned, hash-checked requirements for every platform and Python >= 3.11: the runtime set
# (requirements.lock) and the development set (requirements-dev.lock), which agree on
# every shared package. Existing pins are kept unless LOCK_ARGS=--upgrade.
UV ?= uv
LOCK_ARGS ?=
LOCK := $(UV) pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
	--quiet --custom-compile-command "make lock" $(LOCK_ARGS)

lock:
	$(LOCK) --extra dev -o requirements-dev.lock
	$(LOCK) --constraint requirements-dev.lock -o requirements.lock

clean:
	@if [[ -f .data/nats.pid ]]; then \
		pid=$$(cat .data/nats.pid); \
		if [[ "$$(ps -o comm= -p "$$pid" 2>/dev/null)" == nats-server ]]; then \
			echo "stopping the repo's nats-server (pid $$pid)"; kill "$$pid"; \
			for _ in $$(seq 50); do kill -0 "$$pid" 2>/dev/null || break; sleep 0.1; done; \
		fi; \
	fi
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache build dist site tests/browser/node_modules
	find . -path ./.git -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +
