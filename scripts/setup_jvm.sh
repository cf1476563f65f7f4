#!/usr/bin/env bash
# Fetch Apache Kafka (jvm/pom.xml) from Maven Central with Maven into .cache/jvm/kafka/,
# for the local KRaft broker of the tests and `greta-stream demo`. Spark's Kafka
# connector is not fetched here: Spark's own resolver fetches it (greta_stream.spark.connector).
# Idempotent: a folder is fetched again only when jvm/pom.xml or jvm/settings.xml changed.
# GRETA_JVM_CACHE moves the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${GRETA_JVM_CACHE:-$root/.cache/jvm}

if ! command -v mvn >/dev/null; then
  echo "setup_jvm: mvn (Maven 3.6+) is needed to fetch Apache Kafka from Maven Central (the tests and the demo run a broker)" >&2
  exit 1
fi

stamp=$(cat jvm/pom.xml jvm/settings.xml | sha256sum | cut -c1-16)
mkdir -p "$cache"
for profile in kafka; do
  dest=$cache/$profile
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  echo "setup_jvm: fetching $profile jars into $dest"
  rm -rf "$dest.tmp"
  # Maven's output (colour resets even in batch mode) goes to a log, shown when it fails
  mkdir -p "$dest.tmp"
  if ! mvn -q -B -Dstyle.color=never -s jvm/settings.xml -f jvm/pom.xml -P "$profile" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dest.tmp" > "$cache/mvn-$profile.log" 2>&1; then
    cat "$cache/mvn-$profile.log" >&2
    exit 1
  fi
  echo "$stamp" > "$dest.tmp/.stamp"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
done
