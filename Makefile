# greta-stream developer commands. `make run` and `make test` are all a fresh machine needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install run test test-all lint bench clean

install: $(BIN)/greta-stream  ## create .venv and install the project with its dev tools

$(BIN)/greta-stream: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: install  ## run the main job on the bundled sample stream; rows land in out/q1_stock.jsonl
	mkdir -p out
	$(BIN)/greta-stream evaluate --query configs/q1_stock.greta --events configs/sample_stock.jsonl \
		--output out/q1_stock.jsonl --dead-letter out/dead_letters.jsonl
	@echo "results: out/q1_stock.jsonl ($$(wc -l < out/q1_stock.jsonl) rows)"

test: install  ## the default test suite (what CI runs)
	$(BIN)/python -m pytest -q

lint: install  ## ruff over the package and tests
	$(BIN)/ruff check greta_stream tests benchmarks

bench: install  ## engine benchmarks: events/s and peak memory for Q1-Q3
	$(BIN)/python benchmarks/bench_engine.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
