PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet
# setuptools boxes a warning about folders named like the packages into every editable install's
# output; here those folders are the packages.
EDITABLE := PYTHONWARNINGS='ignore:Editable installation' $(PIP) -e
# The CPU build of PyTorch must be installed before the training extras, or they pull a CUDA build.
TORCH := torch==2.13.0

.PHONY: setup setup-all run test lint format bench clean image-test swarm-test serve-replicas docs \
	docs-update

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

# Serving the MCP tools needs the package alone; the tests need every extra.
$(VENV)/.serve: pyproject.toml | $(BIN)/python
	$(EDITABLE) .
	touch $@

$(VENV)/.all: pyproject.toml $(VENV)/.serve
	$(PIP) $(TORCH)
	$(EDITABLE) '.[openenv,train,skyrl,eval,green,inspect,dev,docs]'
	touch $@

# The verifiers door (doors/verifiers) in an environment of its own: verifiers 0.4 needs mcp 2,
# which cannot share one with OpenEnv 0.10 (mcp<2). It holds the engine (the repository root's
# plain install) and the door; its tests run there.
VENV_VERIFIERS ?= .venv-verifiers
$(VENV_VERIFIERS)/.verifiers: pyproject.toml doors/verifiers/pyproject.toml
	$(PYTHON) -m venv $(VENV_VERIFIERS)
	$(VENV_VERIFIERS)/bin/python -m pip install --quiet --upgrade pip
	PYTHONWARNINGS='ignore:Editable installation' $(VENV_VERIFIERS)/bin/python -m pip install --quiet \
		-e . -e 'doors/verifiers[test]'
	touch $@

# The plain install (pip install sqlenv-mcp: mcp 2.x) with only what the MCP door's tests need;
# make test runs those tests there too. The main environment has mcp 1.x (the openenv extra's).
VENV_MCP2 ?= .venv-mcp2
# The MCP door's tests, and the attack tests on the MCP server (their names say mcp).
MCP2_TESTS := tests/sqlenv_mcp tests/attacks/test_fair_use.py tests/attacks/test_client_identity.py \
	tests/attacks/test_timing_side_channel.py -k mcp

$(VENV_MCP2)/.mcp-tests: pyproject.toml
	$(PYTHON) -m venv $(VENV_MCP2)
	PYTHONWARNINGS='ignore:Editable installation' $(VENV_MCP2)/bin/python -m pip install \
		--quiet -e '.[mcp-tests]'
	touch $@

# The MCP Inspector (Node) that the tests drive in CLI mode.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

setup: $(VENV)/.serve

setup-all: $(VENV)/.all

run: setup
	$(BIN)/sqlenv-mcp --transport http --route-by-episode-id

test: setup-all $(VENV_MCP2)/.mcp-tests $(VENV_VERIFIERS)/.verifiers node_modules/.package-lock.json
	scripts/install-browser.sh
	scripts/apt-install.sh haproxy haproxy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory docs
	$(BIN)/pytest
	$(VENV_MCP2)/bin/pytest -o addopts=-ra $(MCP2_TESTS)
	$(VENV_VERIFIERS)/bin/pytest tests/doors/verifiers
	$(VENV_VERIFIERS)/bin/pytest tests/sqlenv_mcp/mcp2/test_mcp_eras.py -k stdio  # MCP on verifiers' mcp 2.0.0

# The Dockerfile built and run (tests/deploy/test_image.py; `make test` runs it too).
image-test: setup-all node_modules/.package-lock.json
	scripts/install-browser.sh
	$(BIN)/pytest tests/deploy/test_image.py

# deploy/swarm/stack.yml on a single-node swarm, scaled and a replica killed, and the Kubernetes
# manifests checked against the Kubernetes schemas (`make test` runs both with the rest; Docker
# and the stand-in base images come from scripts/docker-stand-in-base.sh).
swarm-test: setup-all
	$(BIN)/pytest tests/deploy/test_swarm.py tests/deploy/test_kubernetes.py

# N OpenEnv and N MCP servers behind HAProxy: OpenEnv on :8000, MCP on :8001/mcp, stats on :8404.
N ?= 4
serve-replicas: setup-all
	scripts/apt-install.sh haproxy haproxy
	$(BIN)/python deploy/serve_replicas.py --replicas $(N) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

# The docs: every example on the pages is the program's output now (cog --check; the examples
# run the commands, on Spider in ../shared/data/spider where a page uses it), then the site
# is built into build/site with no warning allowed. docs-update rewrites the examples.
COG := $(BIN)/cog -I scripts/docs -p "import cli_reference; from doc_examples import *"
PAGES = README.md $(shell find docs -name '*.md' | sort)

docs: setup-all
	$(COG) --check --diff --verbosity=1 --check-fail-msg='the docs differ from the program: run make docs-update and review the diff' $(PAGES)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-update: setup-all
	$(COG) -r --verbosity=1 $(PAGES)

format: setup-all
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup-all
	$(EDITABLE) '.[bench]'
	$(BIN)/python benchmarks/bench_engine.py --data-dir ../shared/data/spider
	$(BIN)/python benchmarks/bench_mcp.py --data-dir ../shared/data/spider
	$(BIN)/python benchmarks/bench_openenv.py --data-dir ../shared/data/spider

clean:
	rm -rf $(VENV) $(VENV_MCP2) $(VENV_VERIFIERS) build *.egg-info
