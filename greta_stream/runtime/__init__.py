"""The runtime contract: one run spec, one runner interface, one batch driver.

Imports the engine and CET layers; imported by connectors, spark, the CLI,
the Python API and the service. Never imports pyspark.

- `spec.RunSpec`: a query's run, validated once (compiled query, mode,
  engine choice, field names, time kind, lateness); builds and restores
  runners.
- `runner.Runner`: what every runner implements (general engine, columnar
  stream, CET extraction) and the order a driver calls it in.
- `batch.evaluate_spec`: the whole run over a finite input.
"""

from greta_stream.runtime.batch import COLUMNAR_MIN_EVENTS, ResultRows, evaluate_spec, runs_on
from greta_stream.runtime.runner import Runner
from greta_stream.runtime.spec import ENGINES, MODES, RunSpec

__all__ = ["COLUMNAR_MIN_EVENTS", "ENGINES", "MODES", "ResultRows", "Runner", "RunSpec", "evaluate_spec", "runs_on"]
