# repro — set-up, tests, demo, benchmarks. Every target does its own set-up.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TESTS ?= tests
# pytest-xdist workers for `make test`: more than the cores, since most tests wait on a container, a job or a
# training process they started; the Slurm tests share one worker (tests/conftest.py), `serial` ones run last.
JOBS ?= 4
PARALLEL := -n $(JOBS)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install test test-unit test-fast fuzz demo lint docker-up slurm-up slurm-down base-image bench locks clean gpu-check gpu-wheels

# repro's own dependencies, hash-pinned (Python 3.11, linux x86_64); `make locks` refreshes them.
DEV_LOCK := lockfiles/dev.lock.txt
RUNTIME_LOCK := lockfiles/runtime.lock.txt
COMPILE := -m piptools compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links

$(VENV)/.installed: pyproject.toml $(DEV_LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --require-hashes -r $(DEV_LOCK)
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

install: $(VENV)/.installed ## create .venv with repro and its dev dependencies (torch==2.13.0) from lockfiles/

locks: ## refresh lockfiles/ (repro's runtime and dev locks) from pyproject.toml; then `make install`
	test -x $(PY) || $(MAKE) install
	$(PY) $(COMPILE) --output-file $(RUNTIME_LOCK) pyproject.toml
	$(PY) $(COMPILE) --extra dev --output-file $(DEV_LOCK) pyproject.toml

test: install ## the whole suite: unit, cli, integration (real training, real Docker engine, rootless Podman and local Slurm where they run)
	@bash scripts/docker-up.sh || { test -z "$$CI" || exit 1; \
		echo "make test: no Docker engine this user can use; docker tests skip with a reason"; }
	@bash scripts/podman-up.sh || echo "test: no rootless Podman for an unprivileged user here; the podman tests skip"
	@bash scripts/slurm-up.sh || echo "test: no local Slurm cluster here; the slurm tests skip"
	@bash scripts/browser-up.sh || echo "test: no headless chromium here; the HTML-report browser test skips"
	@bash scripts/registry-up.sh || echo "test: no docker-registry/skopeo here; the registry tests skip"
	@# the suite starts about a thousand Python processes that import repro: its bytecode is compiled
	@# once here, as pip does for an installed package (where PYTHONDONTWRITEBYTECODE is set, each
	@# process would otherwise compile every module it imports again, ~0.2 s of CPU a process)
	$(PY) -m compileall -q repro
	$(PY) -m pytest $(TESTS) $(PARALLEL) -m "not serial" --durations=30 --durations-min=5
	$(PY) -m pytest $(TESTS) -m serial || [ $$? -eq 5 ]  # 5: no serial test among TESTS

test-unit: install ## the unit tier alone (under a minute: nothing started, no engine)
	$(PY) -m pytest tests/unit

test-fast: install ## the unit, process and cli tiers (no integration tests)
	$(PY) -m pytest tests/unit tests/process tests/cli $(PARALLEL)

fuzz: install ## the hostile-capsule fuzzer over every field and member kind (make test runs a seeded sample)
	@bash scripts/docker-up.sh || echo "fuzz: no Docker engine here; the docker replays are left out"
	REPRO_FUZZ=all $(PY) -m pytest tests/integration/test_capsule_fuzz.py -q

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

slurm-up: ## install and start a local two-node Slurm cluster (n1, n2 on loopback; root + apt); idempotent
	bash scripts/slurm-up.sh

slurm-down: ## stop the local Slurm cluster's daemons
	bash scripts/slurm-down.sh

bench: install ## benchmarks against named peers; results in benchmarks/RESULTS.md
	$(PY) benchmarks/run_all.py

# GPU machines have their own Python and torch and no network: `make gpu-wheels` (here, with network) puts
# repro's runtime dependencies into .whl/ as manylinux x86_64 wheels for CPython 3.11 and 3.12; carry .whl/
# with the tree and run `make gpu-check` there (it never runs `install`: no venv, no dev lock).
GPU_WHEELS := .whl
GPU_PYTHON ?= python3
gpu-wheels: ## download repro's runtime dependencies as wheels (manylinux x86_64, cp311 and cp312) into .whl/
	mkdir -p $(GPU_WHEELS)
	grep -E '^[A-Za-z0-9][A-Za-z0-9._-]*==' $(RUNTIME_LOCK) | sed 's/ .*//' \
		| grep -v -E '^(pip|setuptools)==' > $(GPU_WHEELS)/requirements.txt
	for v in 3.11.9 3.12.3; do \
		$(PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version $$v --implementation cp \
			--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
			--platform manylinux_2_34_x86_64 --platform manylinux1_x86_64 --platform any \
			-d $(GPU_WHEELS) -r $(GPU_WHEELS)/requirements.txt || exit 1; \
	done

gpu-check: ## on a machine with NVIDIA GPUs: every GPU claim of the README, report in gpu-check/ (no GPU: nothing to do)
	$(GPU_PYTHON) scripts/gpu-check

clean:
	rm -rf $(VENV) .repro recipes/*/.repro recipes/*/outputs
