#!/usr/bin/env bash
# Installs Debian's PostgreSQL server where it is missing, for the tests that start a real one
# (test/support/postgres.ts) and `make bench`. Prints the directory of its binaries (initdb, postgres).
set -euo pipefail

log() { printf '[postgres] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi
}

# The newest installed major version's binaries (Debian keeps each under /usr/lib/postgresql/<major>/bin).
bin_dir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)
  [[ -n $dir && -x $dir/initdb && -x $dir/postgres ]] && printf '%s\n' "$dir"
}

if ! bin_dir >/dev/null; then
  command -v apt-get >/dev/null || die "PostgreSQL is not installed and there is no apt-get: install Debian's postgresql package"
  log "installing postgresql from Debian's packages"
  install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql)
  # A fresh machine may have no package lists yet: read them once, then try again.
  as_root "${install[@]}" >/dev/null 2>&1 || { as_root apt-get update -qq && as_root "${install[@]}" >/dev/null; } \
    || die "apt-get install postgresql failed"
fi
bin_dir || die "postgresql is installed but no /usr/lib/postgresql/*/bin holds initdb and postgres"
