"""Sources and sinks: JSON lines files (and, with Spark, Kafka), dead letters.

Imports the engine layer; never the service.
"""
