# Benchsmith: the two set-up commands are `make demo` and `make test`.
# Both create .venv on first use and reuse it afterwards (re-installing only
# when pyproject.toml changes). The first install builds llama-cpp-python from
# source (about 11 minutes on 2 cores); pip caches the wheel for later installs.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)
export HF_HUB_OFFLINE := 1

.PHONY: demo test ui install bench clean-data

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Materialise the whole asset graph at the configured scale (demo by default) on the embedded model.
demo: $(STAMP)
	$(BIN)/python -m assets.materialize_all
	@echo
	@echo "Open the Dagster UI on this project:  make ui   (then http://127.0.0.1:3000)"
	@echo "The per-model reports:  data/reports/index.html"
	@echo "Try a query:  $(BIN)/python -m warehouse.query \"SELECT * FROM report.headline\""

## Install (if needed) and run the whole test suite. .ci/run calls exactly this.
test: $(STAMP)
	$(BIN)/python -m pytest -q

## The Dagster UI (webserver + daemon) on this project, instance config from ./dagster.yaml.
ui: $(STAMP)
	$(BIN)/dagster dev -h 127.0.0.1 -p 3000

bench: $(STAMP)
	$(BIN)/python benchmarks/llm_ledger.py
	$(BIN)/python benchmarks/demo_calls.py
