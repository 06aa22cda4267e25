#!/usr/bin/env bash
# Runlet's container images, with whichever engine the machine has:
#
#   images.sh build [VERSION]  build $IMAGE_REPO/runlet:VERSION (Dockerfile) and $IMAGE_REPO/python-runtime:VERSION
#                              (runtime/python/Dockerfile); IMAGE_REPO defaults to runlet, VERSION to package.json's;
#                              and make sure the engine has the chart's PostgreSQL image (pulled, or its stand-in)
#
# The engine: RUNLET_IMAGE_ENGINE if set, else docker when its daemon answers, else podman, else buildah,
# else podman installed with apt (root or sudo). A base image that cannot be pulled is built as a stand-in
# from Debian's packages under the Dockerfile's own name (images/stand-in-bases.sh).
#
# Behind a TLS-intercepting proxy, `npm ci` inside the build needs the proxy's CA: NODE_EXTRA_CA_CERTS (a PEM
# file, as Node itself reads it) is passed to the build as the secret npm_ca, never stored in a layer.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
IMAGE_REPO=${IMAGE_REPO:-runlet}
# Podman's configuration for this repo's builds and tests, given by CONTAINERS_CONF (unless the caller set one)
# rather than installed under /etc: podman may have come from anywhere (node.sh installs it too), and Debian's
# defaults raise RLIMIT_NOFILE in every container, which an unprivileged sandbox (these machines) refuses.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$REPO/images/podman-containers.conf}

log() { printf '[images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi
}
install_packages() {
  command -v apt-get >/dev/null || die "cannot install $*: no apt-get (install docker, podman or buildah yourself)"
  log "installing $* from Debian's packages"
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@")
  # A fresh machine may have no package lists yet: read them once, then try again.
  as_root "${install[@]}" >/dev/null 2>&1 || { as_root apt-get update -qq && as_root "${install[@]}" >/dev/null; } \
    || die "apt-get install $* failed"
}

# Sets ENGINE: docker, podman or buildah.
choose_engine() {
  local choice=${RUNLET_IMAGE_ENGINE:-}
  if [[ -z $choice ]]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then choice=docker
    elif command -v podman >/dev/null; then choice=podman
    elif command -v buildah >/dev/null; then choice=buildah
    else
      install_packages podman runc
      choice=podman
    fi
  fi
  command -v "$choice" >/dev/null || die "RUNLET_IMAGE_ENGINE=$choice is not installed"
  ENGINE=$choice
  # RUN --mount (the npm_ca secret) needs BuildKit, docker's default builder from Docker 23 on.
  [[ $ENGINE != docker ]] || export DOCKER_BUILDKIT=1
}

# The few engine commands this script uses, where buildah spells them differently from docker and podman.
engine_build() {
  if [[ $ENGINE == buildah ]]; then buildah bud "$@"; else "$ENGINE" build "$@"; fi
}
engine_pull() { "$ENGINE" pull "$@"; }
# engine_label IMAGE LABEL: the label's value; fails when the engine has no such image.
engine_label() {
  if [[ $ENGINE == buildah ]]; then
    buildah inspect --type image --format "{{ index .OCIv1.Config.Labels \"$2\" }}" "$1"
  else
    "$ENGINE" image inspect --format "{{ index .Config.Labels \"$2\" }}" "$1"
  fi
}

# NAME as the registries (and a kubelet) read it: docker.io/library/node:24-bookworm-slim for
# node:24-bookworm-slim, docker.io/runlet/runlet:0.1.0 for runlet/runlet:0.1.0. docker qualifies short names
# so itself; podman and buildah would tag them localhost/..., a name neither a Dockerfile's FROM nor a
# Kubernetes image field means.
qualified() {
  local name=$1 first=${1%%/*}
  if [[ $name != */* ]]; then echo "docker.io/library/$name"
  elif [[ $first == *.* || $first == *:* || $first == localhost ]]; then echo "$name"
  else echo "docker.io/$name"; fi
}

# The base image a Dockerfile starts from (each stage here uses the same one).
dockerfile_base() {
  sed -nE 's/^FROM +([^ ]+).*/\1/p' "$1" | grep -v '^scratch$' | sort -u
}

build_image() {
  local name=$1 dockerfile=$2 context=$3 base args=()
  for base in $(dockerfile_base "$dockerfile"); do ensure_base "$base"; done
  if grep -q 'id=npm_ca' "$dockerfile" && [[ -n ${NODE_EXTRA_CA_CERTS:-} ]]; then
    [[ -r $NODE_EXTRA_CA_CERTS ]] || die "NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS is not a readable file"
    args+=(--secret "id=npm_ca,src=$NODE_EXTRA_CA_CERTS")
  fi
  # The bases are local (pulled or stand-ins) by now: never let the build try a registry for them.
  [[ $ENGINE == docker ]] || args+=(--pull=never)
  log "building $name ($dockerfile) with $ENGINE"
  local started=$SECONDS
  engine_build "${args[@]}" --tag "$(qualified "$name")" --file "$dockerfile" "$context" >&2 \
    || die "building $name from $dockerfile failed"
  log "built $name in $((SECONDS - started)) s"
}

main() {
  local command=${1:-build}
  # shellcheck source=images/stand-in-bases.sh
  source "$REPO/images/stand-in-bases.sh"
  # shellcheck source=images/postgres-stand-in.sh
  source "$REPO/images/postgres-stand-in.sh"
  choose_engine
  case "$command" in
    build)
      # One build at a time per machine: two would build the same stand-in into the same cache file.
      mkdir -p "$IMAGES_CACHE"
      exec 9>"$IMAGES_CACHE/.build.lock"
      flock 9
      local version=${2:-$(sed -nE 's/^ *"version": *"([^"]+)".*/\1/p' "$REPO/package.json" | head -n1)}
      build_image "$IMAGE_REPO/runlet:$version" "$REPO/Dockerfile" "$REPO"
      build_image "$IMAGE_REPO/python-runtime:$version" "$REPO/runtime/python/Dockerfile" "$REPO/runtime/python"
      # Not built from this repo: the chart's embedded PostgreSQL runs it, so the tiers that install the chart
      # need it next to the two images above.
      ensure_postgres_image
      ;;
    *) die "unknown command $command (build [VERSION])" ;;
  esac
}

main "$@"
