#!/usr/bin/env bash
# Fetch the JVM artifacts of jvm/pom.xml from Maven Central into .cache/jvm/:
#   .cache/jvm/spark-kafka/  Spark's Kafka connector jars (given to Spark as spark.jars)
#   .cache/jvm/kafka/        Apache Kafka, for the local KRaft broker of tests and `greta-stream demo`
# Idempotent: a folder is fetched again only when jvm/pom.xml or jvm/settings.xml changed.
# Spark never downloads anything at run time. GRETA_JVM_CACHE moves the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
cache=${GRETA_JVM_CACHE:-$root/.cache/jvm}

if ! command -v mvn >/dev/null; then
  echo "setup_jvm: mvn (Maven 3.6+) is needed to fetch the Kafka jars from Maven Central" >&2
  exit 1
fi

stamp=$(cat jvm/pom.xml jvm/settings.xml | sha256sum | cut -c1-16)
mkdir -p "$cache"
for profile in spark-kafka kafka; do
  dest=$cache/$profile
  if [ "$(cat "$dest/.stamp" 2>/dev/null)" = "$stamp" ]; then
    continue
  fi
  echo "setup_jvm: fetching $profile jars into $dest"
  rm -rf "$dest.tmp"
  mvn -q -B -Dstyle.color=never -s jvm/settings.xml -f jvm/pom.xml -P "$profile" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dest.tmp"
  echo "$stamp" > "$dest.tmp/.stamp"
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
done
