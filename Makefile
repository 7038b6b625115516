# Two commands do all set-up on a fresh machine:
#   make run    installs what the hub and its shipped servers need (not the test
#               tools), then serves the shipped servers.toml over HTTP
#   make test   installs everything (the dev extras, the Node test clients), then
#               runs the test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(CURDIR)/$(VENV)/bin
NODE_BIN := $(CURDIR)/js/node_modules/.bin
# The PATH make was started with: the hub runs with it, so the servers a user adds
# find the machine's own node, npx, uvx and python (servers.toml finds its own
# commands without make's help: the hub's bin folder and each server's `path`).
USER_PATH := $(PATH)
# The venv first, then the Node packages, for what make runs (tests, lint).
export PATH := $(BIN):$(NODE_BIN):$(PATH)

HOST ?= 127.0.0.1
PORT ?= 8765

.PHONY: setup runtime run test lint browser check-all clean lock-upgrade

setup: $(VENV)/.installed js/node_modules/.installed

# What `make run` needs: the hub with its runtime dependencies and the shipped
# servers (the `servers` extra; npm's dependencies, not its devDependencies).
runtime: $(VENV)/.runtime js/node_modules/.runtime

# Every dependency comes at the version in requirements.lock (pip constraints), so a
# fresh install is the one the suite was run with; the lock holds the dev extras
# too, and a constraint only pins what is installed.
$(VENV)/.installed: pyproject.toml requirements.lock
	@echo "==> installing the hub with its test and lint tools into $(VENV) (pip)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --progress-bar on -c requirements.lock -e '.[servers,dev]'
	touch $@ $(VENV)/.runtime

$(VENV)/.runtime: pyproject.toml requirements.lock
	@echo "==> installing the hub and the shipped Python servers into $(VENV) (pip; the test tools are left out: make test adds them)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --progress-bar on -c requirements.lock -e '.[servers]'
	touch $@

js/node_modules/.installed: js/package.json js/package-lock.json
	@echo "==> installing the Node servers and test clients into js/node_modules (npm)"
	cd js && npm install --no-audit --no-fund --loglevel=error
	touch $@ js/node_modules/.runtime

js/node_modules/.runtime: js/package.json js/package-lock.json
	@echo "==> installing the shipped Node server into js/node_modules (npm --omit=dev)"
	cd js && npm install --omit=dev --no-audit --no-fund --loglevel=error
	touch $@

# The hub runs with the PATH make was started with (see USER_PATH).
run: runtime
	@echo "==> serving servers.toml on http://$(HOST):$(PORT)/mcp (Ctrl-C stops)"
	env PATH='$(USER_PATH)' $(BIN)/mcp-hub serve --transport http --host $(HOST) --port $(PORT)

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
