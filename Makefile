# repro — set-up, tests, demo, benchmarks. Every target does its own set-up.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TESTS ?= tests
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install test test-fast demo lint docker-up base-image bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed ## create .venv with repro and its dev dependencies (torch==2.13.0)

test: install ## the whole suite: unit, cli, integration (real training, real Docker engine where one answers)
	@bash scripts/docker-up.sh || { test -z "$$CI" || exit 1; \
		echo "make test: no Docker engine here (starting one needs root); docker tests skip with a reason"; }
	$(PY) -m pytest $(TESTS)

test-fast: install ## unit and cli tests only
	$(PY) -m pytest tests/unit tests/cli

demo: install ## the quick-start: run a tiny real training under repro, show it, replay it, print the verdict
	@bash scripts/docker-up.sh || echo "demo: no Docker engine here; the local backend runs the demo"
	cd recipes/quickstart && ../../$(VENV)/bin/repro run --seed 42 -- python train.py --lr 0.05
	cd recipes/quickstart && ../../$(VENV)/bin/repro show latest
	cd recipes/quickstart && ../../$(VENV)/bin/repro replay latest

lint: install ## ruff, and mypy --strict over the package and the tests (CI runs it)
	$(VENV)/bin/ruff check repro tests benchmarks
	$(VENV)/bin/ruff format --check repro
	$(VENV)/bin/mypy --strict repro tests

docker-up: install ## install and start a Docker engine where none answers, and make the base image
	bash scripts/docker-up.sh

bench: install ## benchmarks against named peers; results in benchmarks/RESULTS.md
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .repro recipes/*/.repro recipes/*/outputs
