PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint install clean bench

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test,eval]'
	touch $(STAMP)

install: $(STAMP)

## Start the whole service on the embedded default with the sample vault.
run: $(STAMP)
	$(BIN)/mem up --demo

## Run every test (starts what the tests need: embedded PostgreSQL, worker processes, a git remote).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .mem .pytest_cache
