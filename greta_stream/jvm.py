"""Where the JVM artifacts live.

`<cache>/spark-<name>/` holds the jars of each Spark package of
`greta_stream.choices.PACKAGES`, per version: `spark-kafka/<spark version>/`
Spark's Kafka connector, `spark-delta/<delta version>-spark<spark version>/`
Delta Lake's, as Spark's own resolver fetched them (`greta_stream.spark.connector`,
run by `make install`; their jars are handed to Spark as `spark.jars`),
`<cache>/kafka/` Apache Kafka for the local KRaft broker of the tests and
the demo (`scripts/setup_jvm.sh`, with Maven), `<cache>/classes/` the archive
of Spark's classes that a driver JVM maps at its start (`class_archive`,
built by `greta-stream warm-up`), `<cache>/native/` RocksDB's native library
unpacked once from Spark's own jar (`rocksdb_library_dir`).
The cache is `$GRETA_JVM_CACHE` when set (the Docker image sets it), else a
checkout's `.cache/jvm/` when it is there, else the user's cache folder
`~/.cache/greta-stream/jvm` (`$XDG_CACHE_HOME/greta-stream/jvm`), where an
installed wheel looks. Imports nothing from the package but the lowest layer
(`choices`), so any layer may use it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import tempfile
import zipfile
from pathlib import Path

from greta_stream.choices import DELTA, KAFKA, Package

SETUP_HINT = ("run `make setup-jvm` (scripts/setup_jvm.sh, with Maven) in a checkout to fetch them from Maven "
              "Central, or set GRETA_JVM_CACHE to a folder that holds them")
CONNECTOR_HINT = ("run `python -m greta_stream.spark.connector` (`make install` does) to have Spark fetch it, "
                  "or set GRETA_JVM_CACHE to a folder that holds it")
ARCHIVE_ENV = "GRETA_JVM_ARCHIVE"  # a file: the class archive to use (or build); off: none
# The JVM's own class-data-sharing messages off: a JVM that cannot map its archive (a JDK updated in place,
# another class path) starts without it, and says so at warning level on every start otherwise
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"
DELTA_HINT = ("install the delta extra (pip install 'greta-stream[delta]'; `make install` does), then run "
              "`python -m greta_stream.spark.connector` to have Spark fetch Delta Lake's jars")


CHECKOUT_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "jvm"  # where scripts/setup_jvm.sh puts them


def cache_dir() -> Path:
    """Where the jars are looked up (see the module docstring)."""
    env = os.environ.get("GRETA_JVM_CACHE")
    if env:
        return Path(env)
    if (CHECKOUT_CACHE.parents[1] / "pyproject.toml").is_file():  # running from a checkout (make install)
        return CHECKOUT_CACHE
    return user_cache_dir()


def user_cache_dir() -> Path:
    """The user's cache folder for the jars: $XDG_CACHE_HOME (default ~/.cache)/greta-stream/jvm."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "greta-stream" / "jvm"


def jars(profile: str) -> list[Path]:
    """The jars of one profile of jvm/pom.xml (`kafka`), sorted; [] when not fetched."""
    folder = cache_dir() / profile
    if not (folder / ".stamp").is_file():  # written last by setup_jvm.sh: the folder is complete
        return []
    return sorted(folder.glob("*.jar"))


def package_dir(pkg: Package, spark_version: str | None = None) -> Path | None:
    """Where `pkg`'s jars for `spark_version` (default: the installed pyspark's) are kept:
    `spark-<name>/<spark version>`, or `spark-<name>/<version>-spark<spark version>` for a package
    that follows a distribution's version (None: that distribution is not installed)."""
    spark = spark_version or _version("pyspark")
    if pkg.follows is None:
        return cache_dir() / f"spark-{pkg.name}" / spark
    version = installed_version(pkg.follows)
    return None if version is None else cache_dir() / f"spark-{pkg.name}" / f"{version}-spark{spark}"


def package_jars(pkg: Package, spark_version: str | None = None) -> list[Path]:
    """`pkg`'s jars as Spark's resolver retrieved them, sorted; [] when not fetched (or what it follows is
    not installed)."""
    folder = package_dir(pkg, spark_version)
    return [] if folder is None else _fetched(folder)


def spark_kafka_jars(spark_version: str | None = None) -> list[Path]:
    """Spark's Kafka connector's jars (`package_jars`)."""
    return package_jars(KAFKA, spark_version)


def spark_delta_jars(spark_version: str | None = None) -> list[Path]:
    """Delta Lake's jars (`package_jars`)."""
    return package_jars(DELTA, spark_version)


def installed_version(dist: str) -> str | None:
    """The installed version of the Python distribution `dist` (a format's extra), or None."""
    try:
        return _version(dist)
    except Exception:  # noqa: BLE001 - PackageNotFoundError: not installed
        return None


def _fetched(folder: Path) -> list[Path]:
    if not (folder / ".stamp").is_file():  # written last by connector.fetch: the folder is complete
        return []
    return sorted((folder / "jars").glob("*.jar"))


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def java_home() -> Path | None:
    """The JDK that Spark's launcher runs (`$JAVA_HOME/bin/java`, else `java` on the PATH), its links
    resolved; None without one."""
    env = os.environ.get("JAVA_HOME")
    found = str(Path(env) / "bin" / "java") if env else shutil.which("java")
    if not found or not Path(found).is_file():
        return None
    return Path(found).resolve().parents[1]


def class_archive() -> Path | None:
    """The archive of Spark's classes (class data sharing) for this JDK and pyspark, built or not:
    `$GRETA_JVM_ARCHIVE` when it names a file, else `<cache>/classes/spark-<pyspark>-jdk-<key>.jsa`, the key
    naming the JDK's folder and its class image (`lib/modules`), so that another JDK, or the same one
    updated, finds none. None when `$GRETA_JVM_ARCHIVE` is `off`, or there is no JDK or no pyspark."""
    env = os.environ.get(ARCHIVE_ENV, "")
    if env.lower() in ("off", "0", "false", "no"):
        return None
    if env:
        return Path(env)
    home, spark = java_home(), installed_version("pyspark")
    if home is None or spark is None:
        return None
    try:
        image = (home / "lib" / "modules").stat()
    except OSError:
        return None
    key = hashlib.sha256(f"{home}|{image.st_size}|{image.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_dir() / "classes" / f"spark-{spark}-jdk-{key}.jsa"


def archive_options() -> str:
    """The driver JVM's options that map `class_archive` when it was built ('' otherwise)."""
    path = class_archive()
    if path is None or not path.is_file():
        return ""
    return f"{java_option('-XX:SharedArchiveFile=', path)} {QUIET_CDS}"


def rocksdb_library_dir() -> Path | None:
    """A folder holding `librocksdbjni.so`, RocksDB's native library for this machine, unpacked from the
    rocksdbjni jar of the Spark that runs (`$SPARK_HOME/jars`, else pyspark's) into
    `<cache>/native/<jar>-<platform>/` on first use; None where there is no such jar or library, or the
    cache cannot be written.

    RocksDB's loader first asks the JVM's library path for `librocksdbjni.so`; without it, every JVM that
    opens a RocksDB state store unpacks the library (15 MB) into the temporary folder under a random name,
    which only a normal exit removes: a killed JVM (a crash, `kill -9`, a supervisor's restart) leaves it
    there. With this folder on the driver's library path (`spark.driver.extraLibraryPath`) nothing is
    unpacked per JVM."""
    entry = _rocksdb_entry()
    jar = _rocksdb_jar()
    if entry is None or jar is None:
        return None
    folder = cache_dir() / "native" / f"{jar.stem}-{entry.removeprefix('librocksdbjni-').removesuffix('.so')}"
    target = folder / "librocksdbjni.so"
    try:
        with zipfile.ZipFile(jar) as z:
            size = z.getinfo(entry).file_size
            if target.is_file() and target.stat().st_size == size:
                return folder
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".librocksdbjni-", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as out, z.open(entry) as src:  # zipfile checks the entry's CRC
                    shutil.copyfileobj(src, out, 1 << 20)
                os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from other users of a shared cache (an image's)
                os.replace(tmp, target)  # whole or not at all, whoever else unpacks at the same time
            finally:
                Path(tmp).unlink(missing_ok=True)
    except (OSError, KeyError, zipfile.BadZipFile):
        return None  # RocksDB unpacks its own copy, as without this folder
    return folder


def _rocksdb_jar() -> Path | None:
    """The rocksdbjni jar on the class path of the Spark that pyspark launches."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        try:
            import pyspark
        except ImportError:
            return None
        home = str(Path(pyspark.__file__).parent)
    found = sorted((Path(home) / "jars").glob("rocksdbjni-*.jar"))
    return found[-1] if len(found) == 1 else None  # none, or more than one: which the JVM loads is unsure


def _rocksdb_entry() -> str | None:
    """The jar's entry of RocksDB's library for this machine (glibc Linux on x86-64 or arm64), else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return {"x86_64": "librocksdbjni-linux64.so", "aarch64": "librocksdbjni-linux-aarch64.so"}.get(platform.machine())


def java_option(flag: str, path: Path) -> str:
    """`flag` with `path` as one option of a JVM options string (Spark's launcher splits those at
    whitespace outside double quotes)."""
    return f'{flag}"{path}"' if any(c.isspace() for c in str(path)) else f"{flag}{path}"


def kafka_classpath() -> str:
    """A java -cp value for the Kafka broker and its tools; raises when not fetched."""
    found = jars("kafka")
    if not found:
        raise FileNotFoundError(f"Apache Kafka jars are not in {cache_dir() / 'kafka'}: {SETUP_HINT}")
    return os.pathsep.join(str(j) for j in found)
