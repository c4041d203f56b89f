# The single entry point for humans and CI. `make run` and `make test` set everything up.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_WHEELS := $(wildcard /opt/wheels)
# pytest-xdist workers (`make test TEST_WORKERS=0` runs in one process); the 25 slowest tests are listed
TEST_WORKERS ?= auto

.PHONY: setup run test lint typecheck unit bench schema clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	$(BIN)/pip install -q torch==2.13.0 $(if $(TORCH_WHEELS),--find-links /opt/wheels,)
	touch $@

run: setup
	$(BIN)/perfmodel serve

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=25

test: lint typecheck unit

bench: setup
	$(BIN)/python benchmarks/accuracy.py
	$(BIN)/python benchmarks/predict_speed.py

schema: setup
	$(BIN)/perfmodel hardware schema > hardware_specs/schema.json
	$(BIN)/perfmodel hardware index

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
