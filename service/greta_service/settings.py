"""Service settings: one frozen object, read from defaults < config file < environment < flags.

The config file is TOML (`.toml`) or YAML (anything else) with the field names
below at its top level (or under a `[service]` table). Environment variables
are the field names upper-cased with a `GRETA_` prefix (`GRETA_API_KEY`,
`GRETA_DATA_DIR`, `GRETA_PORT`, ...); `GRETA_SERVICE_CONFIG` names a config
file. Imports nothing from Spark.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from greta_service.store import own_files
from greta_stream import ConfigError, Limits

ENV_PREFIX = "GRETA_"
CONFIG_ENV = "GRETA_SERVICE_CONFIG"


class Settings(BaseModel):
    """Everything the service reads at start; see the module docstring for sources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    api_key: str | None = Field(None, description="required on every endpoint but /healthz and /readyz (mutating "
                                "ones only with public_reads); mandatory beyond loopback")
    public_reads: bool = Field(False, description="with an API key: reads (results, queries, plan, metrics, the page, "
                               "the docs) answer without it")
    data_dir: Path = Field(Path("greta-data"), description="registry, results store and checkpoints live here")
    store_url: str | None = Field(None, description="results store; default sqlite:///<data_dir>/greta.sqlite")
    spark_master: str | None = None
    spark_shuffle_partitions: int | None = Field(None, ge=1)
    spark_driver_memory: str | None = Field(None, pattern=r"^[0-9]+[kmgtKMGT]?$", description="the Spark JVM's "
                                            "heap (`spark.driver.memory`, e.g. 4g; default Spark's 1g): every "
                                            "stream's plans and progress live there, so many sources need more")
    log_level: str = "info"
    # Request and query limits.
    max_request_bytes: int = Field(1 << 20, ge=1024)
    max_query_chars: int = Field(20_000, ge=10)
    state_budget_bytes: int = Field(4 << 30, ge=1, description="all queries: a new query is refused while the "
                                    "registered queries' state takes this many bytes or more")
    max_shards: int = Field(64, ge=1, description="per query: state shards (Spark partitions of the operator)")
    max_state_bytes: int = Field(1 << 30, ge=1, description="per query: state memory before the query is failed")
    stream_restarts: int = Field(3, ge=0, description="a stream that dies (a Python worker lost under load, say) "
                                 "is restarted from its checkpoint this many times within 10 minutes before its "
                                 "queries are failed")
    spark_restarts: int = Field(2, ge=0, description="Spark's JVM lost (out of heap, killed) is replaced by a new "
                                "one, every stream resuming from its checkpoint, this many times within 30 minutes; "
                                "lost once more, the service stays down (/readyz 503) saying what to do")
    max_cet_trends: int = Field(10_000, ge=1, description="per query: max_trends of CET mode")
    max_page_rows: int = Field(1000, ge=1)
    max_windows_per_event: int = Field(1_000, ge=1, description="per query: windows each event is in "
                                       "(WITHIN / SLIDE); a query beyond it is refused")
    max_panes_per_window: int = Field(10_000, ge=1, description="per query: panes of each window "
                                      "(WITHIN / gcd(WITHIN, SLIDE)); a query beyond it is refused")
    max_future_s: float = Field(30 * 86_400, gt=0, description="events further ahead of a stream's watermark "
                                "are dead-lettered as future")
    # Result retention per query in the results store (sinks keep everything): unset, no bound.
    result_retention_rows: int | None = Field(None, ge=1, description="keep each query's newest rows only")
    result_retention_s: float | None = Field(None, gt=0, description="keep rows stored within this many seconds")
    # Relative source and sink paths resolve against data_dir; every resolved path
    # must lie under one of path_roots. Unset: anywhere on loopback, only under
    # data_dir when the service binds beyond loopback (see allowed_roots).
    path_roots: tuple[Path, ...] = ()
    # Kafka hosts a request may name in bootstrap_servers besides loopback ones.
    kafka_hosts: tuple[str, ...] = ()
    stop_timeout_s: float = Field(10.0, gt=0, le=600, description="stopping a stream waits this long for its "
                                  "micro-batch to end, then as long again for Spark to stop it")
    # Runtime cadence.
    trigger_interval_s: float = Field(1.0, ge=0)
    monitor_interval_s: float = Field(1.0, gt=0)
    sse_poll_s: float = Field(0.5, gt=0)
    sse_keepalive_s: float = Field(15.0, gt=0)

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def allowed_roots(self) -> tuple[Path, ...]:
        """Folders that source and sink paths must lie under (empty: anywhere)."""
        if self.path_roots:
            return self.path_roots
        return () if self.loopback else (self.data_dir,)

    @property
    def limits(self) -> Limits:
        """The caps every registered query's windows must fit."""
        return Limits(self.max_windows_per_event, self.max_panes_per_window)

    @property
    def checkpoint_dir(self) -> Path:
        return self.data_dir / "checkpoints"

    @property
    def resolved_store_url(self) -> str:
        return self.store_url or f"sqlite:///{self.data_dir / 'greta.sqlite'}"

    @property
    def protected_paths(self) -> tuple[Path, ...]:
        """What no source or sink may reach: the checkpoint folder (the streams' state and control
        folders) and, for a sqlite store, every file it writes (`store.own_files`: the database with
        SQLite's journals, the registry's backup with its temporary file, registries set aside)."""
        paths = [self.checkpoint_dir]
        url = self.resolved_store_url
        if url.startswith("sqlite:///"):
            paths += own_files(Path(url[len("sqlite:///"):]))
        return tuple(paths)

    def check(self) -> Settings:
        """Refuse settings that would be unsafe to serve with."""
        if not self.loopback and not self.api_key:
            raise ConfigError(
                f"binding {self.host} exposes the service beyond loopback: set an API key "
                f"({ENV_PREFIX}API_KEY or api_key in the config file)"
            )
        return self

    @classmethod
    def load(
        cls, config_file: str | Path | None = None, environ: Mapping[str, str] | None = None, **overrides: Any
    ) -> Settings:
        """Defaults, then the config file, then `GRETA_*` variables, then `overrides` (None = not given)."""
        environ = os.environ if environ is None else environ
        raw: dict[str, Any] = {}
        config_file = config_file or environ.get(CONFIG_ENV)
        if config_file:
            raw.update(_read_file(Path(config_file)))
        for name in cls.model_fields:
            value = environ.get(ENV_PREFIX + name.upper())
            if value is not None:
                raw[name] = _env_value(name, value)
        raw.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**raw)
        except ValidationError as exc:
            raise ConfigError(f"bad service settings: {exc}") from exc


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read service config {path}: {exc}") from exc
    if path.suffix == ".toml":
        data = tomllib.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"service config {path} must be a mapping")
    return dict(data.get("service", data))


def _env_value(name: str, value: str) -> Any:
    if name == "path_roots":
        return tuple(p for p in value.split(os.pathsep) if p)
    if name == "kafka_hosts":
        return tuple(h.strip() for h in value.split(",") if h.strip())
    return value
