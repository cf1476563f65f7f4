# greta-stream developer commands. `make run` and `make test` are all a fresh machine needs.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install setup-connector setup-jvm setup-system run evaluate test test-fast test-nightly test-kafka lint bench bench-spark demo clean

install: $(BIN)/greta-stream setup-connector $(VENV)/warm-up.stamp  ## create .venv, install the library (all extras), the service and the dev tools; no Maven, no system packages

setup-connector: $(BIN)/greta-stream  ## Spark's Kafka connector and Delta Lake's jars, fetched by Spark's own resolver into .cache/jvm (skipped when there)
	@$(BIN)/python -m greta_stream.spark.connector || echo "setup-connector failed: a Kafka or Delta source or sink will have Spark fetch its package when it starts"

setup-system:  ## system packages for the tests only: headless Chromium for the results-page test (apt as root; skipped when present)
	bash scripts/setup_system.sh || echo "setup-system failed: the browser test will be skipped"

setup-jvm:  ## Apache Kafka from Maven Central into .cache/jvm with Maven, for the tests and the demo (skipped when there)
	bash scripts/setup_jvm.sh

$(BIN)/greta-stream: pyproject.toml service/pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[all,dev]' -e ./service
	touch $@

# the numba kernels compiled now, not in the first run, and Spark's classes archived for its JVM's start
# (class data sharing: a start about a quarter shorter), once Spark's packages are in
$(VENV)/warm-up.stamp: $(BIN)/greta-stream | setup-connector
	$(BIN)/greta-stream warm-up
	touch $@

run: install  ## the main job: Q1 on local Spark over the bundled sample stream -> out/q1_stock/ (every window)
	rm -rf out/q1_stock out/checkpoints/q1_stock
	$(BIN)/greta-stream run --query configs/q1_stock.greta --input samples/stock --output out/q1_stock \
		--checkpoint out/checkpoints/q1_stock --lateness 10 --once --flush-at-end
	@echo "results: out/q1_stock/part-*.jsonl ($$(cat out/q1_stock/part-*.jsonl | wc -l) rows)"

evaluate: install  ## the same query without Spark (batch evaluator) -> out/q1_stock.jsonl
	mkdir -p out
	$(BIN)/greta-stream evaluate --query configs/q1_stock.greta --events samples/stock/events.jsonl \
		--output out/q1_stock.jsonl --dead-letter out/dead_letters.jsonl
	@echo "results: out/q1_stock.jsonl ($$(wc -l < out/q1_stock.jsonl) rows)"

test: install setup-jvm setup-system  ## the layering contract and the type checks, then the default test suite (what CI runs; setup-system installs a headless browser with apt for the page test)
	$(BIN)/lint-imports --no-logo
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

test-fast: install  ## the fast tier: no JVM, no subprocess (engines, compiler, pipeline model, oracle differentials at a modest example count)
	GRETA_HYPOTHESIS_SCALE=0.5 $(BIN)/python -m pytest -q -m "not spark and not kafka and not service and not browser and not slow and not subprocess"

test-nightly: install setup-jvm  ## the nightly tier alone: the benchmarks' full runs through Spark, second looks at two topologies (a few minutes)
	GRETA_NIGHTLY=1 $(BIN)/python -m pytest -q -m nightly

test-kafka: install setup-jvm  ## the Kafka tests alone: a real KRaft broker, Kafka source and sink, restarts, the demo
	$(BIN)/python -m pytest -q -m kafka

demo: install setup-jvm  ## Kafka, the event producer and the pipeline as local processes (docker-compose.yml without Docker)
	$(BIN)/greta-stream demo

lint: install  ## ruff over the packages and tests, mypy over the packages, and the layering contract
	$(BIN)/ruff check greta_stream service tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

bench: install  ## engine benchmarks: events/s and peak memory for Q1-Q3
	$(BIN)/python benchmarks/bench_engine.py

bench-spark: install  ## Spark pipeline vs Spark's own windowed count, Q1-Q3 on local[2]
	$(BIN)/python benchmarks/bench_spark.py

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
