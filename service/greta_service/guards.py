"""What a request may ask of a source or a sink: options, paths and hosts.

A request names folders and Kafka brokers the service then reads, writes and
connects to. Everything that could reach beyond what the operator allowed is
refused here, before anything is registered:

- reader and writer `options` are allow-listed per format (Spark options are
  case-insensitive, so are the lists): none of them names a path (`path`,
  `cleanSource`/`sourceArchiveDir`, `kafka.ssl.*.location`, ...) or a broker
  (`kafka.bootstrap.servers`);
- file formats need a `path` (it is then kept under `path_roots` by the
  registry, and away from the service's own files by `check_reach`: no
  source or sink is, lies inside or holds the checkpoint folder or the
  results store, since a folder above them read with `recursiveFileLookup`
  or a glob would reach them);
- every server of `bootstrap_servers` is strictly `host:port` (a DNS name,
  an IPv4 address or a `[IPv6]` address, and a port 1-65535), and its host is
  loopback or one of the `kafka_hosts` setting. The syntax is strict because
  the Kafka client reads hosts its own way (everything before the last colon,
  brackets dropped only around a whole IPv6 address): `[::1]evil.example:9092`
  is host `evil.example` to it, so anything the two readings could disagree on
  is refused.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from greta_stream import ConfigError
from greta_stream.choices import FORMATS, PATH_FORMATS
from greta_stream.pipeline import glob_base

# Options a request may set, lower-cased (`greta_stream.choices.FORMATS`); everything else is refused.
SOURCE_OPTIONS: dict[str, frozenset[str]] = {n: f.source_options for n, f in FORMATS.items() if f.source_options is not None}
SINK_OPTIONS: dict[str, frozenset[str]] = {n: f.sink_options for n, f in FORMATS.items() if f.sink_options is not None}


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
    if spec.get("format") in PATH_FORMATS and not spec.get("path"):
        raise ConfigError(f"{what} of format {spec.get('format')!r} needs a path")


def check_reach(given: str, path: Path, what: str, protected: Iterable[Path]) -> None:
    """`ConfigError` when the file source or sink `given` (at `path`, `data_dir / given` not yet
    resolved) could reach one of `protected` (`Settings.protected_paths`): it is one, lies inside
    one, or is a folder above one. A path with glob characters counts as its longest glob-free
    leading folder: the glob may match anything below that.

    Spark hands the path to Hadoop, which normalizes `..` before it expands globs, as `resolve`
    does; two forms would make `..` after that and are refused: a backslash (an escape, `.\\.`
    reads as `..`) and a `/` inside braces (`{/.,x}.` expands to `/..`)."""
    if "\\" in given:
        raise ConfigError(f"{what} path {given!r} has a backslash: Spark reads it as a glob escape")
    if _slash_in_braces(given):
        raise ConfigError(f"{what} path {given!r} has a '/' inside braces: Spark would expand it into other "
                          f"folders than the one it names")
    resolved = path.resolve()
    bases = {glob_base(path).resolve(), glob_base(resolved)}  # == {resolved} without globs
    for own in (p.resolve() for p in protected):
        if any(folder.is_relative_to(own) for folder in (resolved, *bases)):
            raise ConfigError(f"{what} path {given!r} is inside the service's own {own.name!r} "
                              f"(checkpoints or results store): sources and sinks may not reach it")
        if any(own.is_relative_to(folder) for folder in (resolved, *bases)):
            how = "reading it recursively" if bases == {resolved} else "its glob"
            raise ConfigError(f"{what} path {given!r} is a folder above the service's own {own.name!r} "
                              f"(checkpoints or results store), which {how} would reach: name a folder "
                              f"beside them")


def recursive(spec: dict[str, Any]) -> bool:
    """Whether a file source's options ask Spark to list its folder recursively."""
    return any(str(k).lower() == "recursivefilelookup" and str(v).strip().lower() == "true"
               for k, v in (spec.get("options") or {}).items())


def check_folder_links(given: str, folder: Path, what: str, limit: int = 100_000) -> None:
    """`ConfigError` when `folder` (a source Spark lists recursively, resolved) holds a link to a
    folder that is not strictly inside it: a loop (a link to it or above it) makes Spark list
    everything below the target again, level after level, and a link out of it leads Spark's
    listing wherever it points. Links to folders inside are fine (their files are read once,
    where they are). Looks at `limit` entries at most, following no link."""
    seen = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        seen += len(dirs) + len(files)
        for name in dirs:
            link = Path(top) / name
            if not link.is_symlink():
                continue
            try:
                target = link.resolve()
            except (OSError, RuntimeError):  # a link loop of its own
                target = link
            if target == folder or not target.is_relative_to(folder):
                where = "its own folder or one above it (a loop)" if folder.is_relative_to(target) or \
                    target == link else "a folder out of it"
                raise ConfigError(f"{what} path {given!r} holds {link.relative_to(folder)}, a link to "
                                  f"{where}: with recursiveFileLookup Spark would list through it. Remove the "
                                  f"link, or read without recursiveFileLookup")
        if seen > limit:
            return


def _slash_in_braces(text: str) -> bool:
    depth = 0
    for c in text:
        depth += (c == "{") - (c == "}")
        if c == "/" and depth > 0:
            return True
    return False


def check_kafka_hosts(spec: dict[str, Any], what: str, allowed_hosts: tuple[str, ...]) -> None:
    """Every server of a Kafka spec's `bootstrap_servers` is `host:port` with a loopback host or one of
    `allowed_hosts` (`kafka_hosts`), case-insensitive. Without `bootstrap_servers` the service's own
    $KAFKA_BOOTSTRAP_SERVERS applies: the operator's choice."""
    if spec.get("format") != "kafka" or spec.get("bootstrap_servers") is None:
        return
    servers = spec["bootstrap_servers"]
    if not isinstance(servers, str) or not servers.strip():
        raise ConfigError(f"{what} bootstrap_servers must be host:port[,host:port...]")
    allowed = {_normal(h) for h in allowed_hosts}
    for server in servers.split(","):
        host = kafka_host(server.strip(), what)
        if not (_loopback(host) or _normal(host) in allowed):
            raise ConfigError(f"{what} Kafka host {host!r} is not allowed: loopback only, or the hosts of the "
                              f"kafka_hosts setting")


_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_SERVER = re.compile(rf"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|(?P<name>{_LABEL}(?:\.{_LABEL})*)):(?P<port>[0-9]{{1,5}})",
                     re.IGNORECASE | re.ASCII)


def kafka_host(server: str, what: str = "Kafka") -> str:
    """The host of one `host:port` server (an IPv6 address without its brackets), or `ConfigError`
    when the server is anything else: a DNS name (letters, digits, hyphens, dots), an IPv4 address
    or `[IPv6]`, then `:` and a port 1-65535, nothing before or after."""
    m = _SERVER.fullmatch(server)
    host: str | None = None
    if m and m["ipv6"]:
        host = _ip(m["ipv6"], 6)
    elif m:  # a name of digits and dots only is an IPv4 address or nothing (not 127.1, not 0177.0.0.1)
        host = _ip(m["name"], 4) if m["name"].replace(".", "").isdigit() else m["name"]
    if m is None or host is None or not 1 <= int(m["port"]) <= 65535:
        shown = server if len(server) <= 80 else server[:77] + "..."
        raise ConfigError(f"{what} Kafka server {shown!r} is not host:port (a DNS name, an IPv4 address or an "
                          f"IPv6 address in brackets, then a port 1-65535)")
    return host


def _ip(text: str, version: int) -> str | None:
    try:
        return text if ipaddress.ip_address(text).version == version else None
    except ValueError:
        return None


def _normal(host: str) -> str:
    """A host to compare: lower case, an IP address in its compressed form (`kafka_hosts` may bracket IPv6)."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
