# Two commands do all set-up on a fresh machine:
#   make run    installs everything, then serves the shipped servers.toml over HTTP
#   make test   installs everything, then runs the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/js/node_modules/.bin
# The venv first, then the Node packages, for what make runs. (servers.toml finds
# its upstream commands without this, through [hub] path.)
export PATH := $(BIN):$(NODE_BIN):$(PATH)

HOST ?= 127.0.0.1
PORT ?= 8765

.PHONY: setup run test lint browser check-all clean

setup: $(VENV)/.installed js/node_modules/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

js/node_modules/.installed: js/package.json js/package-lock.json
	cd js && npm install --no-audit --no-fund --loglevel=error
	touch $@

run: setup
	$(BIN)/mcp-hub serve --transport http --host $(HOST) --port $(PORT)

test: setup
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check mcp_hub builtin_tools tests bench
	$(BIN)/mypy
	if [ -x $(BIN)/hadolint ]; then $(BIN)/hadolint Dockerfile; fi

browser: setup
	.ci/install-browser

check-all: lint test

clean:
	rm -rf $(VENV) js/node_modules
