# jobstream developer commands. Every target sets itself up: a fresh clone needs only Python 3.11 and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements-dev.txt layers/jobstream/requirements.txt | cksum | cut -d' ' -f1)
FUNCTIONS := $(wildcard functions/*/app.py)
export PYTHONPATH := $(CURDIR)/layers/jobstream:$(CURDIR)

.PHONY: setup run test lint typecheck cfn-lint pytest bench clean

setup: $(STAMP)

$(STAMP): requirements-dev.txt layers/jobstream/requirements.txt
	@test -n "$(PYTHON)" || { echo "Python 3.11 is required (python3.11 or python3 on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	rm -f $(VENV)/.installed-*
	touch $@

run: setup
	$(BIN)/python -m jobstream_local

test: setup lint typecheck cfn-lint pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy layers/jobstream/jobstream jobstream_local jobstream_cli bench
	@for f in $(FUNCTIONS); do echo "mypy $$f"; $(BIN)/mypy $$f || exit 1; done

cfn-lint: setup
	$(BIN)/cfn-lint template.yaml

pytest: setup
	$(BIN)/pytest -n 2 -q

bench: setup
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .aws-sam
