#!/usr/bin/env bash
# The Debian packages the whole suite uses beyond Python: Chromium (browser tests), Node and npm
# (the agent CLIs in tests/e2e/agents), Redis and PostgreSQL (their tiers). `make test` and .ci/run
# call this; as root it installs what is missing, otherwise it names what is missing (those tests
# then skip) and carries on.
set -euo pipefail
missing=()
need() {  # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need chromium chromium
need node nodejs
need npm npm
need redis-server redis-server
need pg_ctlcluster postgresql
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "missing Debian packages (their tests will skip): ${missing[*]}" >&2
fi
