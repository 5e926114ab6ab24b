# jobstream developer commands. Every target sets itself up: a fresh clone needs only Python 3.11 and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements-*.txt layers/jobstream/requirements*.txt | cksum | cut -d' ' -f1)
FUNCTIONS := $(wildcard functions/*/app.py)
# The layer, the dev packages and the consumer SDK (clients/python, its own pip-installable package).
export PYTHONPATH := $(CURDIR)/layers/jobstream:$(CURDIR):$(CURDIR)/clients/python

# The OpenAPI document the API serves: bundled from schemas/ by the build (tools/openapi.py), never
# committed; schemas/openapi.json is the committed copy (`make openapi`).
SERVED_OPENAPI := layers/jobstream/jobstream/http/openapi.json
OPENAPI_SOURCES := schemas/openapi.yaml schemas/jobstream.schema.json tools/openapi.py \
	$(shell find layers/jobstream/jobstream/jobtypes -name '*.json' -o -name '*.py')

SAM_VENV := .venv-sam
SAM := $(SAM_VENV)/bin/sam

.PHONY: setup run test lint typecheck cfn-lint pytest coverage bench load proof openapi botocore-endpoints deploy-check rehearse rehearse-setup teardown console-screenshots clean

setup: $(STAMP) $(SERVED_OPENAPI)

$(STAMP): requirements-dev.txt requirements-translator.txt layers/jobstream/requirements.txt layers/jobstream/requirements-tracing.txt Makefile
	@test -n "$(PYTHON)" || { echo "Python 3.11 is required (python3.11 or python3 on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-translator.txt
	@# The layer and the dev packages on the venv's path, so `python -m ...` works from anywhere.
	printf '%s\n%s\n%s\n' "$(CURDIR)/layers/jobstream" "$(CURDIR)" "$(CURDIR)/clients/python" > "$$($(BIN)/python -c 'import site; print(site.getsitepackages()[0])')/jobstream-dev.pth"
	@# The operator/consumer CLI as a command: .venv/bin/jobstream
	printf '#!/bin/sh\nPYTHONPATH="%s" exec "%s" -m jobstream_cli "$$@"\n' "$(PYTHONPATH)" "$(CURDIR)/$(BIN)/python" > $(BIN)/jobstream
	chmod +x $(BIN)/jobstream
	rm -f $(VENV)/.installed-*
	touch $@

$(SERVED_OPENAPI): $(OPENAPI_SOURCES) $(STAMP)
	$(BIN)/python -m tools.openapi $@

run: setup
	$(BIN)/python -m jobstream_local

test: setup lint typecheck cfn-lint pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy layers/jobstream/jobstream jobstream_local jobstream_cli bench clients/python rehearsal tools
	@for f in $(FUNCTIONS); do echo "mypy $$f"; $(BIN)/mypy $$f || exit 1; done

cfn-lint: setup
	$(BIN)/cfn-lint template.yaml

# The browser tests (tests/browser) drive Debian's Chromium through Playwright (a dev
# requirement): like the SAM CLI, it is installed when missing (apt-get, as root or with sudo).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "the browser tests need Chromium at $(CHROMIUM): install Debian's chromium package"; exit 1; }
	$(SUDO) apt-get update -qq
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium

# `--dist loadgroup`: the browser tests share one worker (one stack, one browser), and so do the
# conformance suite's tests (its two stacks); every other test is spread as before.
PYTEST := $(BIN)/pytest -n 2 --dist loadgroup -q
pytest: setup $(CHROMIUM)
	$(PYTEST)

# The whole suite under the coverage tracer, with the layer's coverage floor (pyproject.toml:
# tool.coverage); `.venv/bin/coverage report` then says what is not covered. Not part of `test`:
# on Python 3.11 a trace function turns off the interpreter's specialisation everywhere, and the
# suite took 1.5 times as long (893 s against 584 s, idle machine) - past CI's 15 minutes under
# load. `make proof` runs it.
coverage: setup $(CHROMIUM)
	$(PYTEST) --cov --cov-report=

# Rewrites the console's screenshots in docs/console (tracked: the README shows them).
console-screenshots: setup $(CHROMIUM)
	$(BIN)/python -m tests.browser.screenshots docs/console

# The unit and integration suites alone (no stack, client or conformance suites, no gates): the
# quick check while working, a few minutes. `make test` before committing.
.PHONY: test-quick
test-quick: setup
	$(BIN)/pytest -n 2 -q tests/unit tests/integration

# Measures, prints, and REWRITES docs/performance.md (a tracked file: review the diff, commit it
# with the change it measures).
bench: setup
	$(BIN)/python -m bench

# The bounded load test against the local stack (LOAD_ARGS="--jobs 200" for a quicker run),
# then the fairness run (a quiet tenant's jobs behind another's backlog of 1,000) and the endpoint
# outage run (one tenant's receiver down, another's callbacks unaffected), the backlog run (what
# the sweep sends while 1,000 jobs wait) and the rate-limited source (40 jobs on one fake Pixiv
# account); rewrites docs/load.md (tracked).
load: setup
	$(BIN)/python -m bench.load $(LOAD_ARGS)
	$(BIN)/python -m bench.fairness
	$(BIN)/python -m bench.endpoint_outage
	$(BIN)/python -m bench.backlog
	$(BIN)/python -m bench.source_limits

# Everything: every gate and suite (conformance, fuzzing, faults), the coverage floor, the
# benchmarks, the load test.
proof: test coverage bench load

# Render the job types' schemas into schemas/jobstream.schema.json and re-bundle the OpenAPI
# document: the committed schemas/openapi.json (a test says when either is stale) and the copy
# the API serves at GET /openapi.json.
openapi: setup
	$(BIN)/python -m tools.openapi --schema schemas/openapi.json $(SERVED_OPENAPI)

# Narrow botocore's endpoint data to the services the layer's clients use (the layer's
# botocore_data.py says why), from the pinned botocore: after changing that pin (a test says when
# the committed file is stale).
botocore-endpoints: setup
	$(BIN)/python -m tools.botocore_endpoints

# SAM CLI pins its own boto3/click, so it lives in its own venv.
$(SAM):
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli==1.170.0

# Everything a deploy relies on, offline: lint, SAM's own validation and build, the template and
# sample-event tests, the privilege and deployer-policy tests.
deploy-check: setup $(SAM) $(SERVED_OPENAPI)
	$(BIN)/cfn-lint template.yaml
	SAM_CLI_TELEMETRY=0 $(SAM) validate --lint
	SAM_CLI_TELEMETRY=0 $(SAM) build --build-dir .aws-sam/build
	$(BIN)/pytest -q tests/unit/test_template.py tests/unit/test_template_privileges.py \
		tests/unit/test_deployer_policy.py tests/integration/test_sample_events.py

# The deployment rehearsal (docs/operations.md): sam build + sam deploy to ministack with IAM
# enforced, an end-to-end journey through the emulated API, queues and schedule, then the
# mutations it must catch. The emulator and the Lambda runtime each have their own virtualenv.
REHEARSAL_VENV := .venv-rehearsal
# The functions' Python (template.yaml's Runtime) where this machine has it, pyenv's included;
# else $(PYTHON), and the rehearsal says it rebuilt the functions for that version.
LAMBDA_PYTHON ?= $(shell PYENV_VERSION=3.13 python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null || echo $(PYTHON))
EMULATOR_STAMP := $(REHEARSAL_VENV)/.emulator-$(shell cat rehearsal/requirements-emulator.txt | cksum | cut -d' ' -f1)
RUNTIME_STAMP := $(REHEARSAL_VENV)/.runtime-$(shell echo $(LAMBDA_PYTHON) | cat - rehearsal/requirements-lambda-runtime.txt | cksum | cut -d' ' -f1)

$(EMULATOR_STAMP): rehearsal/requirements-emulator.txt
	rm -rf $(REHEARSAL_VENV)/emulator $(REHEARSAL_VENV)/.emulator-*
	$(PYTHON) -m venv $(REHEARSAL_VENV)/emulator
	$(REHEARSAL_VENV)/emulator/bin/python -m pip install --quiet -r rehearsal/requirements-emulator.txt
	touch $@

$(RUNTIME_STAMP): rehearsal/requirements-lambda-runtime.txt
	rm -rf $(REHEARSAL_VENV)/lambda-runtime $(REHEARSAL_VENV)/.runtime-*
	$(LAMBDA_PYTHON) -m venv $(REHEARSAL_VENV)/lambda-runtime
	$(REHEARSAL_VENV)/lambda-runtime/bin/python -m pip install --quiet -r rehearsal/requirements-lambda-runtime.txt
	touch $@

rehearse-setup: setup $(SAM) $(EMULATOR_STAMP) $(RUNTIME_STAMP)

rehearse: rehearse-setup
	$(BIN)/python -m rehearsal
	$(BIN)/pytest -q -p no:cacheprovider -m rehearsal tests/rehearsal

# Removes a deployed stack (docs/deploy.md, teardown): empties its bucket, deletes it, and says
# what stays (the table, the registry secret, SAM's artifacts) with the commands for each. Asks
# for the stack's name unless TEARDOWN_ARGS=--yes; the AWS region and credentials are yours.
STACK ?= jobstream
teardown: setup
	$(BIN)/python -m tools.teardown --stack "$(STACK)" $(TEARDOWN_ARGS)

clean:
	rm -rf $(VENV) $(SAM_VENV) $(REHEARSAL_VENV) .mypy_cache .pytest_cache .ruff_cache .aws-sam
