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

.PHONY: setup run test lint browser check-all clean lock-upgrade

setup: $(VENV)/.installed js/node_modules/.installed

# Every dependency comes at the version in requirements.lock (pip constraints), so a
# fresh install is the one the suite was run with.
$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c requirements.lock -e '.[dev]'
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

# For maintainers: take the newest release of every dependency that pyproject.toml
# admits (the SDK within its minor line), in a venv of its own, write them to
# requirements.lock and run the whole suite on them. Commit the lock if it passes.
UPGRADE_VENV := .venv-upgrade
lock-upgrade: js/node_modules/.installed
	rm -rf $(UPGRADE_VENV)
	$(PYTHON) -m venv $(UPGRADE_VENV)
	$(UPGRADE_VENV)/bin/pip install --quiet --upgrade pip
	$(UPGRADE_VENV)/bin/pip install --quiet --upgrade -e '.[dev]'
	{ sed -n '1,2p' requirements.lock; $(UPGRADE_VENV)/bin/pip freeze --exclude-editable | grep -v '^mcp-hub'; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	PATH=$(CURDIR)/$(UPGRADE_VENV)/bin:$(PATH) $(UPGRADE_VENV)/bin/pytest
