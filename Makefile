# Two commands for a new user: `make demo` (the main job) and `make test` (all tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TRACE ?= ../shared/data/mybinder-events/events-2019-03-04.jsonl.gz

.PHONY: demo test venv lint k8s clean

$(BIN)/stickypack: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/stickypack

demo: venv
	$(BIN)/stickypack simulate --scenario dask-burst --plots out/dask-burst --json out/dask-burst.json
	$(BIN)/stickypack simulate --scenario dask-adapt --plots out/dask-adapt --json out/dask-adapt.json
	$(BIN)/stickypack simulate --trace $(TRACE) --plots out/trace --json out/trace.json

k8s:
	tools/k8s/build.sh

lint: venv
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

test: venv k8s lint
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) out
