# Two entry points, each bootstrapping .venv on a fresh machine first:
#   make demo   end-to-end demo on embedded defaults
#   make test   ruff, mypy and the whole pytest suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall only when the project metadata changed: a no-op run costs nothing.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/prewarm demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check forecaster training serving prewarm tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	$(BIN)/python benchmarks/forecast_accuracy.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
