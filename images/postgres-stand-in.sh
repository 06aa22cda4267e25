# The chart's embedded PostgreSQL image (results.postgres.embedded.image), for machines that cannot pull it, as
# stand-in-bases.sh makes the Dockerfiles' bases: sourced by images/images.sh after stand-in-bases.sh, whose
# helpers (mmdebstrap_base, qualified, engine_*, IMAGES_CACHE, STAND_IN_LABEL) it uses. A file of its own because
# stand-in-bases.sh's text is the cache key of the node and python stand-ins: a change here rebuilds only this one.
#
# Built from what the official image (docker-library/postgres 15/bookworm) is built from, step by step: Debian
# bookworm, the `postgres` user and group 999:999 made before the packages (so the files they make are 999's;
# written into /etc/passwd and /etc/group, as useradd is not installed yet; postgresql-common's adduser keeps them),
# PostgreSQL 15 (Debian's postgresql-15 here; the official image installs apt.postgresql.org's build of 15), no
# cluster of Debian's own (the entrypoint's initdb makes one in PGDATA), listen_addresses = '*' in the sample
# configuration initdb copies, the en_US.utf8 locale, gosu and nss_wrapper, and the official entrypoint itself
# (images/postgres/, unchanged): the same POSTGRES_* / PGDATA contract, port 5432, SIGINT to stop.

# test/images/image-names.test.ts keeps this the chart's values.yaml image.
POSTGRES_IMAGE=postgres:15-bookworm
POSTGRES_ENTRYPOINT_DIR=$REPO/images/postgres

# The engine has the image afterwards: kept if present (pulled, or the current stand-in), else pulled, else
# built from Debian's packages (RUNLET_STAND_IN_BASES as for the bases: always skips the pull, never refuses
# the stand-in). The root filesystem is cached under $IMAGES_CACHE/postgres-15-bookworm-<key>.
ensure_postgres_image() {
  local image policy=${RUNLET_STAND_IN_BASES:-auto} key present_key prefix dir stale
  image=$(qualified "$POSTGRES_IMAGE")
  key=$( { cat "${BASH_SOURCE[0]}" "$POSTGRES_ENTRYPOINT_DIR"/*.sh; echo "$DEBIAN_SUITE $DEBIAN_MIRROR"; } | sha256sum | cut -c1-16)
  if present_key=$(engine_label "$image" "$STAND_IN_LABEL" 2>/dev/null); then
    # A pulled image has no such label (Go templates print <no value> for a missing key) and is kept.
    if [[ $present_key == "$key" || (-z $present_key || $present_key == '<no value>') && $policy != always ]]; then
      log "image $POSTGRES_IMAGE: present"; return
    fi
  fi
  if [[ $policy != always ]] && engine_pull "$image" >/dev/null 2>&1; then
    log "image $POSTGRES_IMAGE: pulled"; return
  fi
  [[ $policy != never ]] || die "image $POSTGRES_IMAGE cannot be pulled and RUNLET_STAND_IN_BASES=never"
  prefix=$IMAGES_CACHE/${POSTGRES_IMAGE//[:\/]/-}
  dir=$prefix-$key
  if [[ ! -s $dir/rootfs.tar ]]; then
    log "image $POSTGRES_IMAGE: cannot be pulled; building a stand-in from Debian $DEBIAN_SUITE into $dir"
    for stale in "$prefix"-*; do [[ ! -e $stale ]] || rm -rf "$stale"; done
    mkdir -p "$dir"
    build_postgres_rootfs "$dir/rootfs.tar.partial"
    mv "$dir/rootfs.tar.partial" "$dir/rootfs.tar"
  fi
  # The official image's configuration (its Dockerfile's ENV, VOLUME, ENTRYPOINT, STOPSIGNAL, EXPOSE, CMD).
  printf '%s\n' 'FROM scratch' 'ADD rootfs.tar /' 'ENV LANG=en_US.utf8' 'ENV PG_MAJOR=15' \
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/postgresql/15/bin' \
    'ENV PGDATA=/var/lib/postgresql/data' 'VOLUME /var/lib/postgresql/data' 'ENTRYPOINT ["docker-entrypoint.sh"]' \
    'STOPSIGNAL SIGINT' 'EXPOSE 5432' 'CMD ["postgres"]' "LABEL $STAND_IN_LABEL=$key" >"$dir/Containerfile"
  engine_build --quiet --tag "$image" --file "$dir/Containerfile" "$dir" >/dev/null \
    || die "building the stand-in $POSTGRES_IMAGE from $dir failed"
  log "image $POSTGRES_IMAGE: stand-in built"
}

build_postgres_rootfs() {
  mmdebstrap_base "$1" postgresql-15,postgresql-common,locales,gosu,libnss-wrapper,xz-utils,zstd,less \
    --essential-hook='echo "postgres:x:999:" >>"$1/etc/group"' \
    --essential-hook='echo "postgres:x:999:999:PostgreSQL administrator,,,:/var/lib/postgresql:/bin/bash" >>"$1/etc/passwd"' \
    --essential-hook='install -d -o 999 -g 999 -m 1777 "$1/var/lib/postgresql"' \
    --essential-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d" && echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/stand-in.conf"' \
    --customize-hook='echo "en_US.UTF-8 UTF-8" >>"$1/etc/locale.gen" && chroot "$1" locale-gen >/dev/null' \
    --customize-hook='sed -ri "s!^#?(listen_addresses)\s*=\s*\S+.*!\1 = '"'*'"'!" "$1/usr/share/postgresql/15/postgresql.conf.sample"' \
    --customize-hook='grep -qF "listen_addresses = '"'*'"'" "$1/usr/share/postgresql/15/postgresql.conf.sample"' \
    --customize-hook='install -d -o 999 -g 999 -m 3777 "$1/var/run/postgresql"' \
    --customize-hook='install -d -o 999 -g 999 -m 1777 "$1/var/lib/postgresql/data"' \
    --customize-hook='mkdir -p "$1/docker-entrypoint-initdb.d"' \
    --customize-hook="install -m 0755 '$POSTGRES_ENTRYPOINT_DIR/docker-entrypoint.sh' '$POSTGRES_ENTRYPOINT_DIR/docker-ensure-initdb.sh' \"\$1/usr/local/bin/\"" \
    --customize-hook='ln -sT docker-ensure-initdb.sh "$1/usr/local/bin/docker-enforce-initdb.sh"'
}
