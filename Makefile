# Two commands do all the set-up: `make run` and `make test`. See README.md.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install install-dev install-bench migrate run test test-fast test-browser lint format browser-deps \
	screenshot install-real run-local test-real install-phoenix run-phoenix test-phoenix bench \
	bench-tiny deploy-deps

PIP_INSTALL := $(PY) -m pip install --quiet --disable-pip-version-check

# Two stamps: running needs requirements.txt only; tests and lint add requirements-dev.txt
# (pytest, Playwright, ruff), so `make run` on a fresh machine skips the test tools.
$(VENV)/.installed: requirements.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_INSTALL) -r requirements.txt -c constraints.txt
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PIP_INSTALL) -r requirements-dev.txt -c constraints.txt
	touch $@

# The benchmarks' peers (django-import-export, LangChain's own agent loops, ...): never
# needed to run or test the app.
$(VENV)/.installed-bench: $(VENV)/.installed-dev requirements-bench.txt
	$(PIP_INSTALL) -r requirements-bench.txt -c constraints.txt
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

install-bench: $(VENV)/.installed-bench

migrate: install
	$(PY) manage.py migrate --noinput

# Daphne's options: scripts/serving.py's DAPHNE_OPTIONS says why.
DAPHNE_OPTIONS := --websocket_connect_timeout 30

run: migrate
	$(VENV)/bin/daphne $(DAPHNE_OPTIONS) -b $(HOST) -p $(PORT) project.asgi:application

# The real local model (README "A real local model"): llama-cpp-python's server and the
# SmolLM2-135M GGUF in a venv of their own, which the app reaches over HTTP only.
# llama.cpp's default build targets the building CPU (GGML_NATIVE) and dies with SIGILL
# where the CPU advertises more than the virtual machine runs (AMX here), so it is built
# portable. pip caches the wheel by its source, not by CMAKE_ARGS: if a cached wheel was
# built otherwise, `check` fails and it is rebuilt once without the cache.
REAL_VENV := .venv-real
REAL_PY := $(REAL_VENV)/bin/python
LLAMA_CPP := $(shell grep -i '^llama_cpp_python==' requirements-real.txt)
PORTABLE := CMAKE_ARGS="-DGGML_NATIVE=OFF"

$(REAL_VENV)/.installed: requirements-real.txt
	test -x $(REAL_PY) || $(PYTHON) -m venv $(REAL_VENV)
	@echo "Installing the local model server (compiles llama.cpp the first time: 6-9 minutes on 2 cores)"
	$(PORTABLE) $(REAL_PY) -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-real.txt
	$(REAL_PY) scripts/local_model.py check || { \
		echo "This llama-cpp-python build cannot run here; rebuilding it portable without pip's cache"; \
		$(PORTABLE) $(REAL_PY) -m pip install --quiet --disable-pip-version-check --no-deps \
			--no-cache-dir --force-reinstall "$(LLAMA_CPP)" && $(REAL_PY) scripts/local_model.py check; }
	touch $@

install-real: $(REAL_VENV)/.installed

run-local: migrate install-real
	$(PY) scripts/local_model.py run-app --host $(HOST) --port $(PORT)

# Chats with the real model through the app's consumer; a few minutes on 2 cores.
test-real: install-dev install-real
	$(PY) -m pytest -p no:cacheprovider -m real tests/real

# Arize Phoenix (docs/telemetry-phoenix.md): an OpenTelemetry backend in a venv of its own
# (.venv-phoenix), reached over HTTP only. test-phoenix starts it on a free loopback port with
# a scratch database (tests/phoenix/conftest.py), sends it runs live and as files, reads
# them back through its REST API and stops it: about a minute to install, then 2-3 minutes.
PHOENIX_VENV := .venv-phoenix
PHOENIX_PY := $(PHOENIX_VENV)/bin/python
PHOENIX_PORT ?= 6006

$(PHOENIX_VENV)/.installed: requirements-phoenix.txt constraints-phoenix.txt
	test -x $(PHOENIX_PY) || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_PY) -m pip install --quiet --disable-pip-version-check \
		-r requirements-phoenix.txt -c constraints-phoenix.txt
	touch $@

install-phoenix: $(PHOENIX_VENV)/.installed

# Phoenix in the foreground on 127.0.0.1:$(PHOENIX_PORT), a scratch database, until Ctrl-C;
# it prints the OTEL_* settings that point the app at it.
run-phoenix: install-phoenix
	$(PHOENIX_PY) scripts/phoenix_server.py run --port $(PHOENIX_PORT)

test-phoenix: install-dev install-phoenix
	$(PY) -m pytest -p no:cacheprovider -m phoenix tests/phoenix

browser-deps:
	scripts/ensure-chromium.sh

# nginx, for the check of the example site in deploy/ (tests/deploy/test_config_files.py);
# CI's PostgreSQL + Redis pass needs it (docs/deploy.md).
deploy-deps:
	scripts/ensure-nginx.sh

# The suite runs on every core (pytest-xdist; each module's browser tests stay on one
# worker and share its Chromium). PYTEST_WORKERS=0 runs it in one process; PYTEST_ARGS adds
# to it, e.g. PYTEST_ARGS="-x tests/chat". docs/testing.md says how the suite is split.
PYTEST_WORKERS ?= auto
PYTEST := $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

test: install-dev browser-deps
	$(PYTEST) $(PYTEST_ARGS)

# Everything but the browser tests (and the real model's and Phoenix's, which only make
# test-real and make test-phoenix run).
test-fast: install-dev
	$(PYTEST) -m "not browser and not real and not phoenix" $(PYTEST_ARGS)

# The browser tests alone (what CI runs on a busy machine).
test-browser: install-dev browser-deps
	$(PYTEST) -m browser $(PYTEST_ARGS)

# Every benchmark at its full size (tens of minutes; docs/benchmarks.md has the figures),
# or at a tiny size (seconds each, what CI runs so that none can rot).
bench: install-bench
	$(PY) bench/all.py

bench-tiny: install-bench deploy-deps
	$(PY) bench/all.py --tiny

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# docs/screenshot.png, the chat page of the README: the travel question on a scratch database.
screenshot: install-dev browser-deps
	$(PY) scripts/screenshot.py
