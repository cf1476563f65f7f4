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
  source or sink is, lies inside or holds the checkpoint folder, the
  results store or the registry's backup, since a folder above them read
  by Spark or a glob would reach them);
- a source's folder tree holds no link that leads Spark's listing (which
  follows links, recursiveFileLookup or not) round in a loop or into the
  service's data folder, and is small enough to list (`check_source_tree`);
- no folder a query writes (sinks, dead letters) is, lies inside or holds
  a folder another query, or the same one, reads or writes (`check_places`);
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
from dataclasses import dataclass, field
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
                              f"(checkpoints, registry or results store): sources and sinks may not reach it")
        if any(own.is_relative_to(folder) for folder in (resolved, *bases)):
            how = "reading it recursively" if bases == {resolved} else "its glob"
            raise ConfigError(f"{what} path {given!r} is a folder above the service's own {own.name!r} "
                              f"(checkpoints, registry or results store), which {how} would reach: name a folder "
                              f"beside them")


def recursive(spec: dict[str, Any]) -> bool:
    """Whether a file source's options ask Spark to list its folder recursively."""
    return any(str(k).lower() == "recursivefilelookup" and str(v).strip().lower() == "true"
               for k, v in (spec.get("options") or {}).items())


# What `check_source_tree` lists at most before it refuses a source: Spark lists all of it, links followed,
# at every micro-batch, so a tree beyond these is no source to stream from (and the check stays ~1 s).
MAX_TREE_ENTRIES = 1_000_000  # files and folders, each time a link leads Spark to them
MAX_TREE_FOLDERS = 100_000
MAX_TREE_DEPTH = 64


def check_source_tree(given: str, folder: Path, what: str, protected: Iterable[Path], data_dir: Path, *,
                      contained: bool) -> None:
    """`ConfigError` when the folder tree of the file source `given` (at `folder`, resolved) would lead
    Spark's listing astray. Spark lists every folder below a source, links followed, whether or not it
    reads them (`recursiveFileLookup` only decides which files it reads), so each of these is refused:

    1. a link to the service's data folder or a folder above it, or to (or into) one of `protected`
       (checkpoints, registry, results store);
    2. a link to one of the folders it sits in, or above them (a loop: Spark lists through it level after
       level, each level the whole tree again, until its heap runs out);
    3. with `contained` (`recursiveFileLookup`), a link to a folder out of the source folder;
    4. a tree of more than MAX_TREE_ENTRIES entries or MAX_TREE_FOLDERS folders, counted as Spark would
       list them (through every link: two links to one folder list it twice), or deeper than
       MAX_TREE_DEPTH: too big to check, and to stream from.

    Links to folders inside are fine: a JSON-lines or Parquet file reached twice is read once, where
    it is; a file linked from out of the folder is an `outside_source` dead letter. Each real folder is
    read once (`_Listing`); a folder reached again is counted again, as Spark lists it again."""
    reach = _Reach(str(folder), str(data_dir.resolve()), [str(p.resolve()) for p in protected], contained)
    listings: dict[str, _Listing] = {}
    stack: list[tuple[str, tuple[str, ...]]] = [("", (str(folder),))]  # a folder as listed (relative), its real chain
    entries = folders = 0
    while stack:
        listed, chain = stack.pop()
        folders += 1
        if folders > MAX_TREE_FOLDERS or len(chain) > MAX_TREE_DEPTH + 1:
            raise _too_big(given, what)
        here = listings.get(chain[-1])
        if here is None:
            here = listings[chain[-1]] = _Listing.of(chain[-1])
        entries += here.size
        if entries > MAX_TREE_ENTRIES:
            raise _too_big(given, what)
        for name, target, is_dir in here.branches:
            link = listed + name
            if target is not None:
                reach.check(given, what, link, target, is_dir)
                if is_dir and any(_within(f, target) for f in chain):
                    raise ConfigError(f"{what} path {given!r} holds {link}, a link to its own folder or one above it "
                                      f"(a loop): Spark lists a source's folders through their links, so it would "
                                      f"list the tree again and again, until it runs out of memory. Remove the link")
            if is_dir:
                stack.append((link + "/", (*chain, target or f"{chain[-1]}/{name}")))


@dataclass(frozen=True)
class _Listing:
    """One real folder as `check_source_tree` lists it: how many entries, and its folders and links (name,
    the link's real target or None, whether it is a folder, links followed); plain files are counted only."""

    size: int
    branches: tuple[tuple[str, str | None, bool], ...]

    @classmethod
    def of(cls, folder: str) -> _Listing:
        size = 0
        branches: list[tuple[str, str | None, bool]] = []
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    size += 1
                    if not entry.is_symlink():
                        if entry.is_dir(follow_symlinks=False):
                            branches.append((entry.name, None, True))
                        continue
                    try:
                        target = os.path.realpath(entry.path, strict=True)
                    except OSError:  # a broken link or a loop of links: Spark skips it
                        continue
                    branches.append((entry.name, target, os.path.isdir(target)))
        except OSError:  # unreadable: Spark fails on it, there is nothing to follow
            pass
        return cls(size, tuple(branches))


@dataclass
class _Reach:
    """`check_source_tree`'s rules 1 and 3 for a link's target (real paths as text: the walk compares many)."""

    top: str
    data: str
    protected: list[str]
    contained: bool
    seen: set[str] = field(default_factory=set)

    def check(self, given: str, what: str, link: str, target: str, is_dir: bool) -> None:
        if target in self.seen:
            return
        own = next((p for p in self.protected if _within(target, p) or _within(p, target)), None)
        if own is not None or _within(self.data, target):
            where = f"the service's data folder {self.data!r} or a folder above it" if _within(self.data, target) \
                else f"the service's own {Path(own or '').name!r} (or into it, or a folder above it)"
            raise ConfigError(f"{what} path {given!r} holds {link}, a link to {where}: Spark would list the "
                              f"service's own files through it. Remove the link")
        if self.contained and is_dir and not _within(target, self.top):
            raise ConfigError(f"{what} path {given!r} holds {link}, a link to a folder out of it: with "
                              f"recursiveFileLookup Spark would list through it. Remove the link, or read without "
                              f"recursiveFileLookup")
        self.seen.add(target)


def _within(path: str, folder: str) -> bool:
    """Whether the real path `path` is `folder` or lies inside it (`Path.is_relative_to`, as text)."""
    return path == folder or path.startswith(folder if folder.endswith("/") else folder + "/")


def _too_big(given: str, what: str) -> ConfigError:
    return ConfigError(f"{what} path {given!r} holds more than {MAX_TREE_ENTRIES:,} files and folders or "
                       f"{MAX_TREE_FOLDERS:,} folders, or is deeper than {MAX_TREE_DEPTH} levels (links followed, "
                       f"as Spark lists them at every micro-batch): name a folder that holds less")


@dataclass(frozen=True)
class Place:
    """A folder a query reads (`role` source) or writes (sink, dead_letter): its path as registered, as
    text (a glob source's: the folder it matches under), its format, the query's name."""

    folder: str
    role: str
    format: str
    query: str


def places(name: str, source: dict[str, Any] | None, sinks: Iterable[dict[str, Any]],
           dead_letter: dict[str, Any] | None, data_dir: Path) -> list[Place]:
    """The file folders of one registration (its specs' paths as `Registry._paths` left them: resolved)."""
    out = []
    for role, spec in (("source", source), *(("sink", s) for s in sinks), ("dead_letter", dead_letter)):
        if spec and spec.get("path") and spec.get("format") in PATH_FORMATS:
            path = str(spec["path"])
            if not path.startswith("/"):
                path = os.path.join(data_dir, path)
            if not _GLOB_CHARS.isdisjoint(path):
                path = str(glob_base(Path(path)))
            out.append(Place(path.rstrip("/") or "/", role, str(spec["format"]), name))
    return out


_GLOB_CHARS = frozenset("*?[]{}")


def check_places(new: list[Place], others: Iterable[Place]) -> None:
    """`ConfigError` when a folder of `new` (one registration) and another of it or of `others` (the other
    registered queries) are one folder or one holds the other, and one of them is written: two writers
    would overwrite or mix each other's files (`part-<batch>` names are per query), and a writer inside a
    source, or a source inside a writer, reads what is written back as input (the query's own dead letters
    too, forever). Sources may share folders. One Delta table written twice is `delta_tables_shared`'s."""
    others = list(others)
    new = sorted(new, key=lambda p: p.role == "source")  # a written folder is named first: it is the one to move
    for i, a in enumerate(new):
        for b in (*new[i + 1:], *others):
            if not (_within(a.folder, b.folder) or _within(b.folder, a.folder)) or a.role == b.role == "source" \
                    or (a.format == b.format == "delta" and a.folder == b.folder) or _own_layout(a, b):
                continue
            how = "is" if a.folder == b.folder else "is inside" if _within(a.folder, b.folder) else "holds"
            whose = "this query" if b.query == a.query else f"query {b.query!r}"
            folder = "" if how == "is" else f" {b.folder!r}"
            if "source" not in (a.role, b.role):
                why = "two writers in one folder tree overwrite or mix with each other's files: give each its own"
            elif a.role == "source":
                why = "the query would read what is written there as its input"
            else:
                why = "what is written there would be read back as input"
            raise ConfigError(f"{a.role} path {a.folder!r} {how} the {b.role.replace('_', '-')} folder{folder} "
                              f"of {whose}: {why}. Name a folder apart from every source, sink and dead-letter "
                              f"folder of the service's queries")


def _own_layout(a: Place, b: Place) -> bool:
    """One query's dead letters in a folder under its own sink's (`greta-stream run --output out` writes
    them to out/dead_letters): one writer, its rows and its dead letters in files apart."""
    if a.query != b.query or {a.role, b.role} != {"sink", "dead_letter"} or a.folder == b.folder:
        return False
    sink, dead = (a, b) if a.role == "sink" else (b, a)
    return _within(dead.folder, sink.folder)


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
