# Two commands: `make run` and `make test`. Only Python 3.11+ and make are needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config/gateway.yaml
HOST ?= 127.0.0.1
PORT ?= 8080

.PHONY: run test lint install install-test clean

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

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

run: install
	$(BIN)/toolplex serve --config $(CONFIG) --host $(HOST) --port $(PORT)

test: install-test
	$(BIN)/python -m pytest

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
