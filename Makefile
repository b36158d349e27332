PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet
# The CPU build of PyTorch must be installed before the training extras, or they pull a CUDA build.
TORCH := torch==2.13.0

.PHONY: setup setup-all run test lint format bench clean image-test serve-replicas

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip

# Serving the MCP tools needs the package alone; the tests need every extra.
$(VENV)/.serve: pyproject.toml | $(BIN)/python
	$(PIP) -e .
	touch $@

$(VENV)/.all: pyproject.toml $(VENV)/.serve
	$(PIP) $(TORCH)
	$(PIP) -e '.[openenv,train,eval,dev]'
	touch $@

# The MCP Inspector (Node) that the tests drive in CLI mode.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

setup: $(VENV)/.serve

setup-all: $(VENV)/.all

run: setup
	$(BIN)/sqlenv-mcp --transport http

test: setup-all node_modules/.package-lock.json
	scripts/install-browser.sh
	scripts/apt-install.sh haproxy haproxy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

# The Dockerfile built and run (tests/deploy/test_image.py; `make test` runs it too).
image-test: setup-all node_modules/.package-lock.json
	scripts/install-browser.sh
	$(BIN)/pytest tests/deploy/test_image.py

# N OpenEnv and N MCP servers behind HAProxy: OpenEnv on :8000, MCP on :8001/mcp, stats on :8404.
N ?= 4
serve-replicas: setup-all
	scripts/apt-install.sh haproxy haproxy
	$(BIN)/python deploy/serve_replicas.py --replicas $(N) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

format: setup-all
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup-all
	$(PIP) -e '.[bench]'
	$(BIN)/python benchmarks/bench_engine.py --data-dir ../shared/data/spider
	$(BIN)/python benchmarks/bench_mcp.py --data-dir ../shared/data/spider
	$(BIN)/python benchmarks/bench_openenv.py --data-dir ../shared/data/spider

clean:
	rm -rf $(VENV) build *.egg-info
