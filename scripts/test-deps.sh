#!/usr/bin/env bash
# What `make test` needs beyond `make setup`, from Debian's packages: chromium (the browser
# test), postgresql (the tests of Dagster on PostgreSQL start their own server from it) and
# strace (the commit-race test delays the JVM's renames with it).
# Installed when missing and running as root with apt-get; elsewhere this says what to install.
set -euo pipefail

say() { echo "test-deps: $*" >&2; }
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v strace >/dev/null || missing+=(strace)
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null; then
  missing+=(postgresql)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing Debian's ${missing[*]} with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  say "missing: ${missing[*]} (e.g. 'sudo apt-get install ${missing[*]}'); the tests that need them will fail saying so"
fi
