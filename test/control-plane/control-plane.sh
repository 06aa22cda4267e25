#!/usr/bin/env bash
# A real Kubernetes control plane for the test suite, from Debian bookworm's packages:
#
#   control-plane.sh build        install what is missing and build the binaries (cached, idempotent)
#   control-plane.sh up [DIR]     build if needed, then start etcd, kube-apiserver, kube-controller-manager
#                                 and kube-scheduler on loopback, state in DIR; prints `export KUBECONFIG=…`
#                                 (RUNLET_CONTROL_PLANE_ADVERTISE_ADDRESS: the `kubernetes` Service's endpoint,
#                                 default 127.0.0.1; node.sh's Node relays 198.18.0.1 to the API server;
#                                 RUNLET_CONTROL_PLANE_CLUSTER_EGRESS=1: the API server reaches nodes, pods and
#                                 Services through DIR/cluster-egress.sock, an HTTP CONNECT proxy node.sh serves
#                                 from inside its Node's network namespace: `kubectl logs` and `exec`)
#   control-plane.sh down [DIR]   stop them all (process group kill) and remove DIR
#   control-plane.sh status [DIR] exit 0 when the API server in DIR answers /readyz
#   control-plane.sh stop-apiserver DIR    stop the API server (an outage a test makes); the rest keeps running
#   control-plane.sh start-apiserver DIR   start it again and wait until it answers /readyz
#
# RUNLET_CONTROL_PLANE_AUDIT=1 at `up`: the API server writes an audit log to DIR/logs/audit.log, every write
# by a service account at RequestResponse level (the benchmark of etcd writes reads it; nothing else is logged).
#
# The binaries are built once per machine and source version into
#   ${RUNLET_CONTROL_PLANE_CACHE:-$HOME/.cache/runlet/control-plane}/<version>/bin
# (kubelet and kube-proxy too, for the real Node of node.sh)
# and DIR defaults to ${RUNLET_CONTROL_PLANE_DIR:-/tmp/runlet-control-plane-$UID}.
set -euo pipefail

# The Debian source version this tier is written against (bookworm-security).
KUBE_SOURCE_VERSION=1.20.5+really1.20.2-1.1+deb12u1
KUBE_UPSTREAM_DIR=kubernetes-1.20.5+really1.20.2
CACHE_ROOT=${RUNLET_CONTROL_PLANE_CACHE:-$HOME/.cache/runlet/control-plane}
CACHE=$CACHE_ROOT/$KUBE_SOURCE_VERSION
BIN=$CACHE/bin
STATE_DIR_DEFAULT=${RUNLET_CONTROL_PLANE_DIR:-/tmp/runlet-control-plane-$UID}
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
# Where pods reach the API server (the `kubernetes` Service's endpoint); it listens on 127.0.0.1 whatever this is.
ADVERTISE_ADDRESS=${RUNLET_CONTROL_PLANE_ADVERTISE_ADDRESS:-127.0.0.1}
CLUSTER_EGRESS=${RUNLET_CONTROL_PLANE_CLUSTER_EGRESS:-}
# How long each component may take to become ready on a loaded 2-core machine.
READY_TIMEOUT_SECONDS=${RUNLET_CONTROL_PLANE_READY_TIMEOUT:-120}

log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi
}

# --- build -------------------------------------------------------------------------------------------

# The mirror the machine already uses for bookworm, so the deb-src line points at the same place.
apt_mirror() {
  local uri
  uri=$(grep -rhoE '^(URIs:|deb) +[^ ]*(https?://[^ ]+/debian)( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null \
    | grep -oE 'https?://[^ ]+/debian' | head -n1 || true)
  printf '%s' "${uri:-http://deb.debian.org/debian}"
}

ensure_deb_src() {
  if apt-cache showsrc kubernetes 2>/dev/null | grep -qF "Version: $KUBE_SOURCE_VERSION"; then return; fi
  local mirror list=/etc/apt/sources.list.d/runlet-bookworm-src.sources
  mirror=$(apt_mirror)
  log "adding deb-src for bookworm ($mirror) in $list"
  as_root tee "$list" >/dev/null <<EOF
Types: deb-src
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: ${mirror}-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  as_root apt-get update -qq
  apt-cache showsrc kubernetes 2>/dev/null | grep -qF "Version: $KUBE_SOURCE_VERSION" \
    || die "apt offers no source package kubernetes $KUBE_SOURCE_VERSION (see $list)"
}

ensure_packages() {
  local missing=()
  command -v go >/dev/null || missing+=(golang-go)
  [[ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ]] || missing+=(golang-github-modern-go-reflect2-dev)
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
  command -v openssl >/dev/null || missing+=(openssl)
  # The README walkthrough (test/operator/readme-walkthrough.test.ts) reads TokenRequest answers with jq.
  command -v jq >/dev/null || missing+=(jq)
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# kubectl of the server's minor version (the machine's own kubectl may be far outside the skew policy),
# unpacked from Debian's kubernetes-client into the cache rather than installed over /usr/bin/kubectl.
ensure_kubectl() {
  [[ -x $BIN/kubectl ]] && return
  local work
  work=$(mktemp -d)
  (cd "$work" && apt-get download -qq "kubernetes-client=$KUBE_SOURCE_VERSION" && dpkg-deb -x kubernetes-client_*.deb root)
  install -D -m 0755 "$work/root/usr/bin/kubectl" "$BIN/kubectl"
  rm -rf "$work"
}

ensure_source() {
  [[ -f $CACHE/src/.unpacked ]] && return
  log "fetching the source package kubernetes $KUBE_SOURCE_VERSION into $CACHE/src"
  rm -rf "$CACHE/src" && mkdir -p "$CACHE/src"
  (cd "$CACHE/src" && apt-get source -qq "kubernetes=$KUBE_SOURCE_VERSION" >/dev/null 2>&1) \
    || die "apt-get source kubernetes=$KUBE_SOURCE_VERSION failed"
  [[ -d $CACHE/src/$KUBE_UPSTREAM_DIR ]] || die "the source package did not unpack to $CACHE/src/$KUBE_UPSTREAM_DIR"
  # reflect2 1.0.1 (vendored) builds an API server that crashes on the first custom-resource create
  # with Go >= 1.18; Debian's 1.0.2 is the fixed release.
  rm -rf "$CACHE/src/$KUBE_UPSTREAM_DIR/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$CACHE/src/$KUBE_UPSTREAM_DIR/vendor/github.com/modern-go/reflect2"
  touch "$CACHE/src/.unpacked"
}

# Runs "$@" in the source tree, seen through a GOPATH at $CACHE/gopath (Go's pre-module build mode,
# which is what the Debian package and upstream's 1.20 scripts use).
in_gopath() {
  local gopath=$CACHE/gopath pkg=$CACHE/gopath/src/k8s.io/kubernetes
  mkdir -p "$gopath/src/k8s.io"
  [[ -L $pkg ]] || ln -s "$CACHE/src/$KUBE_UPSTREAM_DIR" "$pkg"
  (cd "$pkg" && PWD=$pkg GOPATH=$gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOCACHE=$CACHE/gocache "$@")
}

go_build() {
  in_gopath nice -n 19 go build -p 2 -tags selinux,notest,providerless -ldflags "-s -w $(version_ldflags)" "$@"
}

version_ldflags() {
  local pkg=k8s.io/kubernetes/vendor/k8s.io/component-base/version
  printf -- '-X %s.gitVersion=v1.20.2 -X %s.gitMajor=1 -X %s.gitMinor=20 -X %s.gitTreeState=archive' "$pkg" "$pkg" "$pkg" "$pkg"
}

# pkg/generated/openapi is generated at build time upstream; the other generated files ship in the tarball.
ensure_openapi() {
  local out=$CACHE/src/$KUBE_UPSTREAM_DIR/pkg/generated/openapi/zz_generated.openapi.go
  [[ -s $out ]] && return
  log "generating pkg/generated/openapi"
  go_build -o "$CACHE/tools/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
  local dirs
  # The packages upstream's Makefile.generated_files feeds openapi-gen: every directory with a
  # +k8s:openapi-gen tag, minus the code-generator and sample-apiserver examples.
  dirs=$(in_gopath bash -c "find -L pkg cmd vendor/k8s.io -name '*.go' -not -path 'vendor/k8s.io/code-generator/*' -not -path 'vendor/k8s.io/sample-apiserver/*' -print0 \
    | xargs -0 grep -l '^// *+k8s:openapi-gen=' | xargs -n1 dirname | LC_ALL=C sort -u | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -")
  in_gopath nice -n 19 "$CACHE/tools/openapi-gen" --logtostderr -i "$dirs" \
    -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
    -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -r "$CACHE/tools/openapi-violations.report"
  [[ -s $out ]] || die "openapi-gen wrote no $out"
}

build() {
  local missing=() name
  for name in "${BINARIES[@]}"; do [[ -x $BIN/$name ]] || missing+=("$name"); done
  if ((${#missing[@]} == 0)) && [[ -x $BIN/kubectl ]] && command -v etcd >/dev/null; then return; fi
  command -v apt-get >/dev/null || die "this tier needs Debian's apt (bookworm) to install and build the control plane"
  mkdir -p "$BIN" "$CACHE/tools"
  ensure_deb_src
  ensure_packages
  ensure_kubectl
  ensure_source
  ensure_openapi
  for name in "${missing[@]}"; do
    log "building $name (nice 19, -p 2)"
    local started=$SECONDS
    go_build -o "$BIN/$name.partial" "./cmd/$name"
    mv "$BIN/$name.partial" "$BIN/$name"
    log "built $name in $((SECONDS - started)) s"
  done
}

# --- up / down ---------------------------------------------------------------------------------------

# N free loopback ports, held together while chosen so they differ (another process may take one before
# the component binds it; then that component fails to start and `up` says so).
free_ports() {
  python3 -c '
import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# A key and a certificate signed by the cluster CA: certificate DIR NAME SUBJECT EXTENSIONS.
certificate() {
  local pki=$1/pki name=$2 subject=$3 extensions=$4
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n%s\n' "$extensions" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
}

# A kubeconfig for a client certificate: kubeconfig DIR NAME SERVER_URL.
kubeconfig() {
  local dir=$1 name=$2 server=$3
  cat >"$dir/$name.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: runlet-control-plane
    cluster: { server: "$server", certificate-authority: "$dir/pki/ca.crt" }
users:
  - name: $name
    user: { client-certificate: "$dir/pki/$name.crt", client-key: "$dir/pki/$name.key" }
contexts:
  - name: $name
    context: { cluster: runlet-control-plane, user: $name, namespace: default }
current-context: $name
KUBECONFIG
}

write_pki() {
  local dir=$1
  mkdir -p "$dir/pki"
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$dir/pki/ca.key" -subj "/CN=runlet-control-plane-ca" -days 30 \
    -out "$dir/pki/ca.crt" 2>/dev/null
  certificate "$dir" apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  certificate "$dir" admin "/O=system:masters/CN=runlet-test-admin" "extendedKeyUsage=clientAuth"
  certificate "$dir" controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  certificate "$dir" scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  # The API server's identity at a kubelet (logs, exec), in system:masters as kubeadm makes it.
  certificate "$dir" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  openssl genrsa -out "$dir/pki/service-account.key" 2048 2>/dev/null
  openssl rsa -in "$dir/pki/service-account.key" -pubout -out "$dir/pki/service-account.pub" 2>/dev/null
}

# Traffic to the cluster (kubelets, pods, Services: `kubectl logs`, `exec`, proxies, webhooks) through an HTTP
# CONNECT proxy on a Unix socket: node.sh serves it from inside its Node's network namespace, where those
# addresses are, and a path crosses network namespaces. Until the Node is up such requests fail to dial.
write_cluster_egress() {
  local dir=$1
  cat >"$dir/egress-selector.yaml" <<YAML
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport: { uds: { udsName: "$dir/cluster-egress.sock" } }
YAML
}

# The API server, as a child of the supervisor (its pid in DIR/apiserver.pid). Exiting on its own, it takes the
# control plane down as any component does; stopped by `stop-apiserver` (which makes the fifo DIR/apiserver.hold
# first), it waits for `start-apiserver` to write to that fifo, then starts again on the same port and etcd.
serve_apiserver() {
  local dir=$1 pid code audit=() cluster_egress=()
  # shellcheck source=/dev/null
  source "$dir/ports"
  if [[ -f $dir/audit-policy.yaml ]]; then
    audit=(--audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log")
  fi
  if [[ -f $dir/egress-selector.yaml ]]; then
    cluster_egress=(--egress-selector-config-file "$dir/egress-selector.yaml" --kubelet-preferred-address-types InternalIP)
  fi
  while :; do
    "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
      --bind-address 127.0.0.1 --advertise-address "$ADVERTISE_ADDRESS" --secure-port "$APISERVER_PORT" --insecure-port 0 \
      --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
      --client-ca-file "$dir/pki/ca.crt" \
      --service-account-issuer https://kubernetes.default.svc.cluster.local \
      --service-account-signing-key-file "$dir/pki/service-account.key" --service-account-key-file "$dir/pki/service-account.pub" \
      --service-cluster-ip-range 10.0.0.0/24 \
      --authorization-mode Node,RBAC \
      --enable-admission-plugins NodeRestriction,OwnerReferencesPermissionEnforcement \
      --kubelet-client-certificate "$dir/pki/apiserver-kubelet-client.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet-client.key" \
      "${audit[@]}" "${cluster_egress[@]}" \
      --profiling=false --logtostderr -v 1 >>"$dir/logs/kube-apiserver.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/apiserver.pid"
    code=0
    wait "$pid" || code=$?
    [[ -p $dir/apiserver.hold ]] || return "$code"
    echo "kube-apiserver stopped by stop-apiserver (exit $code); waiting for start-apiserver"
    read -r _ <"$dir/apiserver.hold"
    echo "kube-apiserver starting again"
  done
}

# A controller (NAME, then its command line), its output in DIR/logs/NAME.log. Exiting on its own it takes the
# control plane down, as any component does; but once `stop-apiserver` has made an outage (DIR/apiserver.outage),
# it may exit for want of the API server (the controller manager does when it cannot renew its controllers'
# tokens), and is started again once the API server answers, as a kubelet restarts a static pod.
serve_controller() {
  local dir=$1 name=$2 code
  shift 2
  while :; do
    code=0
    "$@" >>"$dir/logs/$name.log" 2>&1 || code=$?
    [[ -f $dir/apiserver.outage ]] || return "$code"
    echo "$name exited (exit $code) after an API server outage: starting it again once the API server answers"
    until curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
      "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; do
      sleep 0.5
    done
  done
}

# The audit policy of RUNLET_CONTROL_PLANE_AUDIT=1: every write by a service account (Runlet's operator and
# sidecars among them), with its request and response objects; nothing else.
write_audit_policy() {
  cat >"$1/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: RequestResponse
    userGroups: [system:serviceaccounts]
  - level: None
POLICY
}

# Runs in its own process group (started by `up` through setsid): starts every component as a child (the
# controllers once the API server is ready) and takes the whole group down when one of them exits or when the owner process (RUNLET_CONTROL_PLANE_OWNER_PID,
# e.g. the test runner) is gone, so nothing outlives a killed test run.
supervise() {
  local dir=$1
  # shellcheck source=/dev/null
  source "$dir/ports"
  etcd --name runlet-test --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "runlet-test=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --log-level warn >"$dir/logs/etcd.log" 2>&1 &
  local etcd=$!
  serve_apiserver "$dir" &
  local apiserver=$!
  # The controller manager and the scheduler exit when the API server does not answer at their start.
  local deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
  until curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)) || ! kill -0 "$etcd" "$apiserver" 2>/dev/null; then
      echo "kube-apiserver not ready within ${READY_TIMEOUT_SECONDS} s (or etcd/kube-apiserver exited)"
      kill -TERM 0
    fi
    sleep 0.5
  done
  serve_controller "$dir" kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$dir/controller-manager.kubeconfig" --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$CONTROLLER_MANAGER_PORT" --port 0 --cert-dir "$dir/controller-manager" \
    --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$dir/pki/service-account.key" --root-ca-file "$dir/pki/ca.crt" \
    --profiling=false --logtostderr -v 1 &
  serve_controller "$dir" kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/scheduler.kubeconfig" --authorization-kubeconfig "$dir/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --port 0 --cert-dir "$dir/scheduler" \
    --leader-elect=false --profiling=false --logtostderr -v 1 &
  local owner=${RUNLET_CONTROL_PLANE_OWNER_PID:-}
  if [[ -n $owner ]]; then
    # Polls: a process cannot wait on the exit of a process that is not its child.
    (while kill -0 "$owner" 2>/dev/null; do sleep 2; done; echo "owner process $owner exited") &
  fi
  wait -n || true
  echo "a component (or the owner watch) exited; stopping the control plane"
  kill -TERM 0
}

# Waits until `curl ARGS URL` succeeds, failing when the supervisor is gone or the bound has passed.
wait_ready() {
  local dir=$1 what=$2 url=$3 deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
  shift 3
  until curl -fsS --max-time 5 "$@" "$url" >/dev/null 2>&1; do
    kill -0 "$(cat "$dir/pgid")" 2>/dev/null \
      || die "$what did not start and the control plane stopped; logs in $dir/logs: $(tail -n 3 "$dir/logs/supervisor.log")"
    ((SECONDS < deadline)) || die "$what not ready at $url within ${READY_TIMEOUT_SECONDS} s; logs in $dir/logs"
    sleep 0.5
  done
}

up() {
  local dir=${1:-$STATE_DIR_DEFAULT}
  build
  if [[ -f $dir/pgid ]] && kill -0 "$(cat "$dir/pgid")" 2>/dev/null; then die "a control plane already runs in $dir (down it first)"; fi
  rm -rf "$dir" && mkdir -p "$dir/logs" && dir=$(cd "$dir" && pwd)
  local started=$SECONDS ports name
  read -r -a ports <<<"$(free_ports 5)"
  printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPISERVER_PORT=%s\nCONTROLLER_MANAGER_PORT=%s\nSCHEDULER_PORT=%s\n' "${ports[@]}" >"$dir/ports"
  write_pki "$dir"
  if [[ ${RUNLET_CONTROL_PLANE_AUDIT:-0} == 1 ]]; then write_audit_policy "$dir"; fi
  local server=https://127.0.0.1:${ports[2]}
  for name in admin controller-manager scheduler; do kubeconfig "$dir" "$name" "$server"; done
  if [[ -n $CLUSTER_EGRESS ]]; then write_cluster_egress "$dir"; fi
  setsid "$0" _supervise "$dir" </dev/null >>"$dir/logs/supervisor.log" 2>&1 &
  echo $! >"$dir/pgid"
  wait_ready "$dir" etcd "http://127.0.0.1:${ports[0]}/health"
  wait_ready "$dir" kube-apiserver "$server/readyz" --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key"
  wait_ready "$dir" kube-controller-manager "https://127.0.0.1:${ports[3]}/healthz" -k
  wait_ready "$dir" kube-scheduler "https://127.0.0.1:${ports[4]}/healthz" -k
  printf 'KUBECONFIG=%s\nRUNLET_CONTROL_PLANE_DIR=%s\nRUNLET_CONTROL_PLANE_SERVER=%s\nRUNLET_CONTROL_PLANE_CA=%s\nRUNLET_KUBECTL=%s\n' \
    "$dir/admin.kubeconfig" "$dir" "$server" "$dir/pki/ca.crt" "$BIN/kubectl" >"$dir/env"
  log "ready in $((SECONDS - started)) s: $server (logs in $dir/logs)"
  sed 's/^/export /' "$dir/env"
}

down() {
  local dir=${1:-$STATE_DIR_DEFAULT} pgid
  if [[ ! -f $dir/pgid ]]; then
    log "no control plane in $dir"
    rm -rf "$dir"
    return
  fi
  pgid=$(cat "$dir/pgid")
  kill -TERM -- "-$pgid" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 -- "-$pgid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  rm -rf "$dir"
  log "stopped"
}

status() {
  local dir=${1:-$STATE_DIR_DEFAULT}
  [[ -f $dir/env ]] || exit 1
  # shellcheck source=/dev/null
  source "$dir/env"
  curl -fsS --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "$RUNLET_CONTROL_PLANE_SERVER/readyz" >/dev/null
}

# The API server stopped while everything else runs: an outage for a test. SIGTERM, then SIGKILL after 5 s: it
# closes its port at once, but 1.20 then lingers about 30 s before it exits.
stop_apiserver() {
  local dir=${1:?stop-apiserver needs the control plane directory} pid deadline
  [[ -f $dir/apiserver.pid ]] || die "no API server runs in $dir"
  [[ -p $dir/apiserver.hold ]] && die "the API server in $dir is already stopped"
  mkfifo "$dir/apiserver.hold"
  touch "$dir/apiserver.outage"
  pid=$(cat "$dir/apiserver.pid")
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + 5))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  log "kube-apiserver (pid $pid) stopped"
}

start_apiserver() {
  local dir=${1:?start-apiserver needs the control plane directory}
  [[ -p $dir/apiserver.hold ]] || die "the API server in $dir was not stopped by stop-apiserver"
  echo start >"$dir/apiserver.hold"
  rm -f "$dir/apiserver.hold"
  # shellcheck source=/dev/null
  source "$dir/env"
  wait_ready "$dir" kube-apiserver "$RUNLET_CONTROL_PLANE_SERVER/readyz" --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key"
  log "kube-apiserver ready again"
}

case "${1:-}" in
  build) build ;;
  up) up "${2:-}" ;;
  down) down "${2:-}" ;;
  status) status "${2:-}" ;;
  stop-apiserver) stop_apiserver "${2:-}" ;;
  start-apiserver) start_apiserver "${2:-}" ;;
  _supervise) supervise "$2" ;;
  *)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
