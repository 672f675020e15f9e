# Thin wrappers: every target is one or two visible commands.
PY ?= python3
# The venv's Python (uv sync --python): PY, or a version such as 3.12 that uv downloads.
VENV_PY ?= $(PY)
VENV ?= .venv
BIN := $(VENV)/bin
EXPERIMENT ?= bench/experiments/qwen38-27b-gptq-2x3090.yaml
OUT ?= runs/$(shell date -u +%Y%m%dT%H%M%SZ)
INVENTORY ?= inventory.yml
ARGS ?=

.PHONY: setup setup-runtime setup-pip lock demo test test-unit test-integration test-e2e test-contract test-engine lint bench bench-engine mutation base-image reproduce provision clean

# The Python environment comes from uv.lock (every package pinned, with hashes). uv is
# bootstrapped into .tools/ by pip from requirements/uv.txt (hash-pinned); pass UV=uv to use
# your own (the version in requirements/uv.txt). uv reads UV_* settings, never pip.conf; the lock
# names PyPI files, so no index setting is needed (a mirror: UV_DEFAULT_INDEX=...).
UV ?= .tools/bin/uv
UV_BOOT := $(filter .tools/bin/uv,$(UV))
UV_SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --frozen --python $(VENV_PY) --quiet
# Before anything is built: Python >= 3.11 with venv (stock Ubuntu 22.04 has 3.10); exits 2
# with what to install (scripts/check_python.sh).
CHECK_PY = @sh scripts/check_python.sh '$(PY)' '$(VENV_PY)'

# the uv bootstrap honours PIP_* environment variables but not pip.conf (as uv itself)
.tools/bin/uv: requirements/uv.txt
	$(CHECK_PY) boot
	$(PY) -m venv .tools
	PIP_CONFIG_FILE=/dev/null .tools/bin/pip install --quiet --disable-pip-version-check \
	  --require-hashes --only-binary=:all: -r requirements/uv.txt
	@touch $@

# setup: runtime + the dev group (tests, linters, Ansible); setup-runtime: what `specbench`
# needs to run (the demo, a real run), nothing else.
setup: $(VENV)/.specbench-dev
setup-runtime: $(VENV)/.specbench-runtime

$(VENV)/.specbench-dev: uv.lock pyproject.toml | $(UV_BOOT)
	$(CHECK_PY) sync
	$(UV_SYNC)
	@touch $@ $(VENV)/.specbench-runtime

# --inexact: a runtime sync never removes the dev tools of an earlier `make setup`
$(VENV)/.specbench-runtime: uv.lock pyproject.toml | $(UV_BOOT)
	$(CHECK_PY) sync
	$(UV_SYNC) --no-dev --inexact
	@touch $@

# Without uv: the same pins through pip (requirements/*.txt are exported from uv.lock).
setup-pip:
	$(CHECK_PY) pip
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	@touch $(VENV)/.specbench-dev $(VENV)/.specbench-runtime

# After editing dependencies in pyproject.toml: re-resolve, then re-export the pip files.
lock: | $(UV_BOOT)
	$(UV) lock
	$(UV) export --frozen --quiet --no-emit-project --no-dev -o requirements/runtime.txt
	$(UV) export --frozen --quiet --no-emit-project -o requirements/dev.txt

demo: setup-runtime
	$(BIN)/specbench demo

# Two phases. First every tier but the engine tier, in parallel workers (pytest-xdist): tests
# sharing a Docker resource stay in one worker (tests/tiers.py); three workers on two cores,
# since the Docker and Ansible tests mostly wait. Then the engine tier, in two workers of its
# own: its vLLM servers take both cores (model load, CPU kernels), and beside the other tiers it
# took three times as long (docs/ci-timing.md). Its oracles hold on a loaded machine too
# (tests/engine/merged_streams.py); the second phase is for time, not for quiet. Both phases
# always run; the exit code is the first failure's.
# PYTEST_WORKERS=0: no parallel workers.
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL := $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)
# The engine tier in two lanes (tests/tiers.py: the tiny matrix, and the rest): a server start
# is ~30 s of Python imports, about one core of two, so two lanes overlap (7 min 24 s in the
# quiet CI of 0d617d5 instead of 10-11 min, docs/ci-timing.md). ENGINE_WORKERS=0: one process.
ENGINE_WORKERS ?= 2
ENGINE_PARALLEL := $(if $(filter 0,$(ENGINE_WORKERS)),-p no:xdist,-n $(ENGINE_WORKERS) --dist loadgroup --no-loadscope-reorder)

test: setup lint
	@rc=0; \
	$(BIN)/pytest $(PYTEST_PARALLEL) --durations=30 -m "(unit or integration or e2e or contract) and not gpu" tests || rc=$$?; \
	$(BIN)/pytest $(ENGINE_PARALLEL) --durations=15 -m "engine and not gpu" tests || { r=$$?; [ $$rc -ne 0 ] || rc=$$r; }; \
	exit $$rc

test-unit: setup
	$(BIN)/pytest -m unit tests

test-integration: setup
	$(BIN)/pytest -m integration tests

test-e2e: setup
	$(BIN)/pytest -m "e2e and not gpu" tests

test-contract: setup
	$(BIN)/pytest -m contract tests

test-engine: setup
	$(BIN)/pytest -m engine tests

# check_test_timing.py: no test asserts a latency, percentile or elapsed-time bound (those are
# benchmarks' figures: `make bench`, docs/benchmarks.md); check_function_length.py: no function
# in bench/ has a body over 80 lines (one job each; the script says how it counts);
# check_import_cycles.py: no two modules of bench/ import each other, deferred imports included
LINT_SCRIPTS := scripts/check_test_timing.py scripts/check_function_length.py scripts/check_import_cycles.py
lint: setup
	$(BIN)/ruff check bench tests $(LINT_SCRIPTS)
	$(BIN)/ruff format --check bench tests $(LINT_SCRIPTS)
	$(BIN)/mypy --strict bench
	$(BIN)/lint-imports
	$(BIN)/python scripts/check_test_timing.py
	$(BIN)/python scripts/check_function_length.py
	$(BIN)/python scripts/check_import_cycles.py

# Benchmarks: figures, never pass/fail; their results, with the machine and its load, are in
# docs/benchmarks.md. Not part of `make test`. bench-engine needs Docker and the vLLM CPU image
# (`make test-engine` builds it) and runs the engine tier's tiny experiment (5-8 min on 2 cores);
# tests/bench_compare.py (the fleet's statistics, ~5 min) runs alone.
bench: setup
	$(BIN)/python tests/bench_client.py --quick
	$(BIN)/python tests/bench_emulator.py
	$(BIN)/python tests/bench_sampler.py
	$(BIN)/python tests/bench_report.py
	$(BIN)/python tests/bench_null.py --runs 1

bench-engine: setup
	$(BIN)/python tests/bench_engine_ttft.py $(ARGS)

# Mutation score of the rules that decide a run (docs/MUTATION.md); not part of `make test`.
# MUTATION_JOBS=N runs N mutants at once; ARGS="--only stats acceptance" narrows it.
mutation: setup
	$(BIN)/python scripts/mutation.py $(ARGS)

base-image:
	bash docker/base/build.sh

reproduce: setup
	$(BIN)/specbench matrix $(EXPERIMENT) --out $(OUT) --launcher docker
	$(BIN)/specbench report $(OUT)

provision: setup
	ANSIBLE_CONFIG=ansible/ansible.cfg $(BIN)/ansible-playbook -i $(INVENTORY) ansible/site.yml $(ARGS)

clean:
	rm -rf $(VENV) .tools .pytest_cache .mypy_cache .ruff_cache mutants
