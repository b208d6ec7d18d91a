# Benchsmith: the two set-up commands are `make demo` and `make test`.
# Both create .venv on first use and reuse it afterwards (re-installing only
# when pyproject.toml or the llama.cpp build script changes). The first install
# builds llama-cpp-python from source for any x86-64 CPU with AVX2 (about 10
# minutes on 2 cores) into ~/.cache/benchsmith/wheels, never pip's cache, and
# installs that wheel by path (llm_calls/llama_build.py says why).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
export DAGSTER_HOME := $(CURDIR)
export HF_HUB_OFFLINE := 1

.PHONY: demo test test-fast ui install bench bytecode clean-data

# The project's own packages, compiled to bytecode before each target runs. Python caches it by itself,
# unless PYTHONDONTWRITEBYTECODE is set (as on some build machines and containers): then every process
# compiled the project's modules again (0.3-0.5 s of each command's start, and of each of the test
# suite's subprocesses). compileall rewrites only what changed; pip compiled the packages it installed.
# The packages are the top-level folders with an __init__.py, as benchmarks/paper_calls.py compiles them.
SOURCES := $(patsubst %/__init__.py,%,$(wildcard */__init__.py))

$(STAMP): pyproject.toml llm_calls/llama_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python llm_calls/llama_build.py install
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python llm_calls/llama_build.py check
	touch $(STAMP)

install: $(STAMP)

bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 $(SOURCES)

## Materialise the whole asset graph at the configured scale (demo by default) on the embedded model.
demo: bytecode
	$(BIN)/python -m assets.materialize_all
	@echo
	@echo "Open the Dagster UI on this project:  make ui   (then http://127.0.0.1:3000)"
	@echo "The per-model reports:  data/reports/index.html"
	@echo "Try a query:  $(BIN)/python -m warehouse.query \"SELECT * FROM report.headline\""

## Install (if needed) and run the whole test suite. .ci/run calls exactly this.
test: bytecode
	$(BIN)/python -m pytest -q

## The fast loop: every test but those marked slow (end-to-end runs, PostgreSQL, browsers, fuzzing).
test-fast: bytecode
	$(BIN)/python -m pytest -q -m "not slow"

## The Dagster UI (webserver + daemon) on this project, instance config from ./dagster.yaml, and the
## reports served at http://127.0.0.1:3001 (BENCHSMITH_REPORTS_URL) so the UI's links open them.
ui: bytecode
	$(BIN)/python -m assets.report --serve & reports=$$!; \
	trap 'kill $$reports 2>/dev/null' EXIT INT TERM; \
	$(BIN)/dagster dev -h 127.0.0.1 -p 3000

bench: bytecode
	$(BIN)/python benchmarks/llm_ledger.py
	$(BIN)/python benchmarks/demo_calls.py
	$(BIN)/python benchmarks/llama_build.py
	$(BIN)/python benchmarks/lake_writers.py
	$(BIN)/python benchmarks/paper_calls.py
	$(BIN)/python benchmarks/muso_build.py
	$(BIN)/python benchmarks/cache_lookup.py
	$(BIN)/python benchmarks/dagster_runs.py
	$(BIN)/python -m benchmarks.peer_calls --inspect
	$(BIN)/python -m benchmarks.house
