"""What a request may ask of a source or a sink: options, paths and hosts.

A request names folders and Kafka brokers the service then reads, writes and
connects to. Everything that could reach beyond what the operator allowed is
refused here, before anything is registered:

- reader and writer `options` are allow-listed per format (Spark options are
  case-insensitive, so are the lists): none of them names a path (`path`,
  `cleanSource`/`sourceArchiveDir`, `kafka.ssl.*.location`, ...) or a broker
  (`kafka.bootstrap.servers`);
- file formats need a `path` (it is then kept under `path_roots` by the
  registry);
- every Kafka host of `bootstrap_servers` is loopback or one of the
  `kafka_hosts` setting.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from greta_stream import ConfigError

FILE_FORMATS = ("jsonl", "parquet")

# Options a request may set, lower-cased; everything else is refused.
SOURCE_OPTIONS: dict[str, frozenset[str]] = {
    "jsonl": frozenset({"maxfilespertrigger", "maxbytespertrigger", "maxfileage", "pathglobfilter",
                        "recursivefilelookup", "encoding", "linesep"}),
    "parquet": frozenset({"maxfilespertrigger", "maxbytespertrigger", "maxfileage", "pathglobfilter",
                          "recursivefilelookup", "mergeschema"}),
    "kafka": frozenset({"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "failondataloss",
                        "fetchoffset.numretries", "fetchoffset.retryintervalms", "kafka.request.timeout.ms",
                        "kafka.default.api.timeout.ms", "kafka.max.poll.records", "kafka.fetch.max.bytes"}),
}
SINK_OPTIONS: dict[str, frozenset[str]] = {
    "kafka": frozenset({"kafka.request.timeout.ms", "kafka.delivery.timeout.ms", "kafka.max.block.ms",
                        "kafka.linger.ms", "kafka.batch.size", "kafka.compression.type", "kafka.acks",
                        "kafka.default.api.timeout.ms"}),
}


def check_options(spec: dict[str, Any], what: str, allowed: dict[str, frozenset[str]]) -> None:
    """`ConfigError` naming every option of `spec` its format does not allow."""
    options = spec.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError(f"{what} options must be an object")
    ok = allowed.get(str(spec.get("format")), frozenset())
    refused = sorted(k for k in options if str(k).lower() not in ok)
    if refused:
        known = ", ".join(sorted(ok)) or "none"
        raise ConfigError(f"{what} option(s) {', '.join(map(str, refused))} are not allowed for format "
                          f"{spec.get('format')!r} (allowed, case-insensitive: {known})")


def check_path_given(spec: dict[str, Any], what: str) -> None:
    if spec.get("format") in FILE_FORMATS and not spec.get("path"):
        raise ConfigError(f"{what} of format {spec.get('format')!r} needs a path")


def check_kafka_hosts(spec: dict[str, Any], what: str, allowed_hosts: tuple[str, ...]) -> None:
    """Every host of a Kafka spec's `bootstrap_servers` is loopback or allowed (`kafka_hosts`).
    Without `bootstrap_servers` the service's own $KAFKA_BOOTSTRAP_SERVERS applies: the operator's choice."""
    if spec.get("format") != "kafka" or spec.get("bootstrap_servers") is None:
        return
    servers = spec["bootstrap_servers"]
    if not isinstance(servers, str) or not servers.strip():
        raise ConfigError(f"{what} bootstrap_servers must be host:port[,host:port...]")
    allowed = {h.lower() for h in allowed_hosts}
    for server in servers.split(","):
        host = _host(server.strip())
        if not (_loopback(host) or host.lower() in allowed):
            raise ConfigError(f"{what} Kafka host {host!r} is not allowed: loopback only, or the hosts of the "
                              f"kafka_hosts setting")


def _host(server: str) -> str:
    if server.startswith("["):  # [::1]:9092
        return server[1:].partition("]")[0]
    host, _, _port = server.rpartition(":")
    return host or server


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
