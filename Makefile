# Two entry points: `make demo` and `make test`. Each builds .venv on its own when it is
# missing or older than pyproject.toml, then runs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_OUT ?= out/demo

# Offline and quiet Prefect: no telemetry, state inside the project's ignored .state/.
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS := 90
export PREFECT_HOME ?= $(CURDIR)/.state/prefect

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	mkdir -p $(PREFECT_HOME)
	$(BIN)/cnc-corpus run refresh-corpus --input sample_data --out $(DEMO_OUT)

test: $(STAMP)
	mkdir -p $(PREFECT_HOME)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .state out .pytest_cache .ruff_cache
