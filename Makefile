# Thin wrappers: every target is one or two visible commands.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXPERIMENT ?= bench/experiments/qwen38-27b-gptq-2x3090.yaml
OUT ?= runs/$(shell date -u +%Y%m%dT%H%M%SZ)
INVENTORY ?= inventory.yml
ARGS ?=

.PHONY: setup demo test test-unit test-integration test-e2e test-contract test-engine lint base-image reproduce provision clean

setup: $(BIN)/specbench

$(BIN)/specbench: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

demo: setup
	$(BIN)/specbench demo

test: setup lint
	$(BIN)/pytest -m "unit or integration or e2e or contract or engine" tests

test-unit: setup
	$(BIN)/pytest -m unit tests

test-integration: setup
	$(BIN)/pytest -m integration tests

test-e2e: setup
	$(BIN)/pytest -m e2e tests

test-contract: setup
	$(BIN)/pytest -m contract tests

test-engine: setup
	$(BIN)/pytest -m engine tests

lint: setup
	$(BIN)/ruff check bench tests
	$(BIN)/ruff format --check bench tests
	$(BIN)/mypy --strict bench
	$(BIN)/lint-imports

base-image:
	bash docker/base/build.sh

reproduce: setup
	$(BIN)/specbench matrix $(EXPERIMENT) --out $(OUT) --launcher docker
	$(BIN)/specbench report $(OUT)

provision: setup
	ANSIBLE_CONFIG=ansible/ansible.cfg $(BIN)/ansible-playbook -i $(INVENTORY) ansible/site.yml $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
