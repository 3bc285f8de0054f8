# Two commands: `make run` and `make test`. Python 3.11+, Node.js 20+ with npm, and make are needed.
PYTHON ?= python3
NPM ?= npm
TS := adapters/typescript
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config/gateway.yaml
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test lint install install-test clean fuzz soak schema bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Stamp files make installs incremental: reinstall only when pyproject.toml changes.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

# The TypeScript sidecar's packages (zod, tsx), exactly as locked; again only when the lock changes.
$(TS)/node_modules/.installed: $(TS)/package.json $(TS)/package-lock.json
	@command -v $(NPM) >/dev/null || { echo "npm not found: install Node.js 20 or newer (with npm) for TypeScript tools" >&2; exit 1; }
	cd $(TS) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $@

# A real Arcade worker for the upstream tests, in its own venv (Arcade pins its own dependencies).
.venv-arcade/.installed: tests/upstreams/install_arcade.sh
	PYTHON=$(PYTHON) tests/upstreams/install_arcade.sh
	touch $@

install: $(VENV)/.installed $(TS)/node_modules/.installed
install-test: $(VENV)/.installed-test $(TS)/node_modules/.installed .venv-arcade/.installed

run: install
	$(BIN)/toolplex serve --config $(CONFIG) --host $(HOST) --port $(PORT)

test: install-test
	$(BIN)/python -m pytest

# 10,000 generated requests per front against a real gateway, fresh randomness, each front bounded in time.
fuzz: install-test
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-10000} FUZZ_SECONDS=$${FUZZ_SECONDS:-900} FUZZ_RANDOM=1 \
		$(BIN)/python -m pytest -q -s tests/fuzz

# 100,000 calls per kind against the default config; prints memory growth and descendant processes (bench/soak.py).
soak: install-test
	$(BIN)/python -m bench.soak --calls $${SOAK_CALLS:-100000}

# Every front in process and proxied, against a bare Starlette app and the upstream called directly,
# at 1 and 32 connections; then 10,000 tools and a short soak (bench/run.py). BENCH_ARGS="--rounds 3" etc.
bench: install-test
	@bench/install_wrk.sh || echo "wrk is missing: bench/run.py uses its own asyncio client (slower; it caps the figures)"
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The configuration's JSON Schema and reference, generated from the settings models (a test checks both are current).
schema: $(VENV)/.installed
	$(BIN)/toolplex schema > config/schema.json
	$(BIN)/toolplex schema --markdown > docs/configuration-reference.md

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .venv-arcade .pytest_cache .ruff_cache *.egg-info $(TS)/node_modules
