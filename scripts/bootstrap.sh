#!/usr/bin/env bash
# Prepare a machine for `make demo` / `make test`: uv, the locked .venv, Java 17+, and Delta's
# jars for the native engine (downloaded once from Maven Central into .jars/delta and checked
# against their recorded sha256s; set-up fails when one cannot be had, see docs/engines-and-deployment.md),
# with Hadoop's s3a jars (.jars/s3a) when BACKFILL_LAKE_DIR or BACKFILL_LANDING_DIR is s3://...,
# and raw's plain-line reader (.jars/plain-line-fields.jar, compiled with javac; optional, faster).
# The driver JVM's class-data archive is the Makefile's `class-archive`, for the targets that start
# many Spark sessions.
# Installs what it can (uv from PyPI; Java with apt-get when root on Debian),
# otherwise says exactly what is missing and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "bootstrap: $*" >&2; }

find_uv() {
  command -v uv 2>/dev/null && return 0
  for c in "$HOME/.local/bin/uv" "$(python3 -m site --user-base 2>/dev/null)/bin/uv"; do
    [ -x "$c" ] && { echo "$c"; return 0; }
  done
  return 1
}

UV=$(find_uv || true)
if [ -z "$UV" ]; then
  if ! command -v python3 >/dev/null; then
    say "missing: python3 (3.11). Install it, then re-run."; exit 1
  fi
  say "installing uv from PyPI"
  python3 -m pip install --quiet uv 2>/dev/null || python3 -m pip install --quiet --user uv \
    || { say "missing: uv (pip install uv failed; see https://docs.astral.sh/uv/)"; exit 1; }
  UV=$(find_uv) || { say "uv installed but not on PATH"; exit 1; }
fi

java_major() {
  java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing Java 17 (openjdk-17-jre-headless) with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    say "missing: Java 17 or newer for Spark (found: $(java -version 2>&1 | head -1 || echo none))."
    say "install it, e.g. 'sudo apt-get install openjdk-17-jre-headless', and re-run."
    exit 1
  fi
fi

# Each step below is timed; one line sums them up, so a slow set-up says where its time went.
TIMES=()
timed() {  # timed NAME COMMAND...: run COMMAND, note how long it took under NAME
  local name=$1 start
  start=$(date +%s%N)
  shift
  "$@"
  TIMES+=("$name $(( ($(date +%s%N) - start) / 1000000 ))")
}
report_times() {
  local total=0 parts=() name ms
  for entry in "${TIMES[@]}"; do
    read -r name ms <<<"$entry"
    total=$((total + ms))
    parts+=("$name=$(printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)))")
  done
  say "set-up $(printf '%d.%d' $((total / 1000)) $((total % 1000 / 100))) s (${parts[*]})"
}

# Bytecode compiled once, here: a process that may not write it (PYTHONDONTWRITEBYTECODE, a
# read-only image) would otherwise compile every module it imports from source, each time.
# That is about 3.5 s of CPU for each Dagster run, daemon and code server (docs/benchmarks.md).
timed venv "$UV" sync --frozen --quiet --compile-bytecode --extra native  # delta-spark: Delta's Python API
timed bytecode .venv/bin/python -m compileall -q -j 0 backfill_assets >/dev/null
timed delta_jars .venv/bin/python -m backfill_assets.spark.delta_jars
# Raw's plain-line reader, compiled with the JDK's javac (optional: from_json reads them, slower).
if ! command -v javac >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing the JDK's compiler (openjdk-17-jdk-headless) with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null \
    || say "could not install javac: raw's plain lines will be read by from_json (slower)"
fi
timed plain_line_jar .venv/bin/python -m backfill_assets.spark.plain_line_jar
report_times
