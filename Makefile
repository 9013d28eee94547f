# Two entry points, each bootstrapping .venv on a fresh machine first:
#   make demo   end-to-end demo on embedded defaults
#   make test   ruff, mypy and the whole pytest suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest prometheus bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall only when the project metadata changed: a no-op run costs nothing. The bench
# extra (statsforecast, mlforecast) comes too, so the peer comparison is tested like the rest.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/prewarm demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check forecaster training serving prewarm tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

# Two workers by default (PYTEST_WORKERS=0 runs in one process). A file's tests stay on one
# worker, so a module's fixture (a trained model, a live server) is built once and a teardown
# that checks what the whole module reached sees all of it.
PYTEST_WORKERS ?= 2
pytest: $(STAMP) prometheus
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --nbmake --doctest-modules \
		tests notebooks forecaster training serving prewarm benchmarks

# The integration tests run a real Prometheus (Debian package `prometheus`), and the install
# guide's shell blocks run in zsh as well as bash (Debian package `zsh`, macOS's default
# shell). Install what is missing when we may (root, or sudo without a password); otherwise
# those tests skip, or fail when PREWARM_REQUIRE_TOOLS=1 (CI).
PACKAGES := prometheus zsh
prometheus:
	@if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && command -v zsh >/dev/null 2>&1; then \
		:; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
		echo "$(PACKAGES) not found and apt-get unavailable: their tests will skip (fail in CI)"; \
	elif [ "$$(id -u)" = 0 ]; then \
		echo "installing the Debian packages $(PACKAGES)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PACKAGES) >/dev/null \
			|| echo "could not install $(PACKAGES): their tests will skip (fail in CI)"; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
		echo "installing the Debian packages $(PACKAGES) (sudo)"; \
		sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(PACKAGES) >/dev/null \
			|| echo "could not install $(PACKAGES): their tests will skip (fail in CI)"; \
	else \
		echo "$(PACKAGES) not all found; run 'sudo apt-get install -y $(PACKAGES)' to run their tests"; \
	fi

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/forecast_accuracy.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
