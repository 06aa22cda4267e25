#!/usr/bin/env bash
# A real Kubernetes Node for a control-plane.sh cluster: kubelet and kube-proxy (built by control-plane.sh from
# the same Debian source), Debian's containerd with runc, and the containernetworking bridge, all inside a
# network namespace this script creates. Pods get addresses of 198.18.0.0/24 (RFC 2544's benchmark range), which
# exist only inside that namespace; nothing in it has a route off the machine.
#
#   node.sh install                  install what is missing (containerd, runc, CNI plugins, socat, iptables,
#                                    gcc for the pause image) and build the pause image (cached, idempotent)
#   node.sh up CP_DIR [IMAGE...]     start a Node for the control plane in CP_DIR (control-plane.sh up CP_DIR
#                                    --node), state in CP_DIR/node; import IMAGE... (names podman knows, e.g.
#                                    runlet/runlet:0.1.0) into its containerd; prints the namespace's path
#   node.sh down CP_DIR              stop it (process group kill), remove its pods' mounts and the namespace
#
# Why each odd setting is here (what it took to run a pod on a machine that is itself a container):
# - the namespace is entered with `nsenter --net=`: `ip netns exec` remounts /sys, which hides the cgroup
#   mounts (the kubelet dies "mountpoint for cpu not found");
# - containerd's CRI restrict_oom_score_adj: without CAP_SYS_RESOURCE runc cannot lower the sandbox's
#   oom_score_adj ("can't get final child's PID from pipe");
# - the kubelet runs with the cgroupfs driver, no QoS cgroups and no node-allocatable enforcement, and with
#   swap allowed: the machine's cgroups are a hybrid v1 tree the kubelet does not own;
# - the API server listens on the machine's loopback, which the namespace does not share: socat relays a
#   port inside the namespace to it through a Unix socket (a path crosses network namespaces). The kubelet and
#   kube-proxy use 127.0.0.1:<port> inside the namespace, pods use the `kubernetes` Service, whose endpoint
#   is the API server's advertised address, the bridge's 198.18.0.1;
# - node-services.ts, inside the namespace, is the pods' cluster DNS at 198.18.0.1:53 (the kubelet's
#   clusterDNS; CoreDNS is not in Debian) and the API server's way in: its egress selector (control-plane.sh
#   with RUNLET_CONTROL_PLANE_CLUSTER_EGRESS=1) dials the kubelet through an HTTP CONNECT proxy on
#   CP_DIR/cluster-egress.sock, so `kubectl logs` and `exec` reach 198.18.0.1:10250.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The repo's podman configuration (images/podman-containers.conf says why), for the pause image's build.
export CONTAINERS_CONF=${CONTAINERS_CONF:-$HERE/../../images/podman-containers.conf}
KUBE_SOURCE_VERSION=1.20.5+really1.20.2-1.1+deb12u1
KUBE_UPSTREAM_DIR=kubernetes-1.20.5+really1.20.2
CACHE=${RUNLET_CONTROL_PLANE_CACHE:-$HOME/.cache/runlet/control-plane}/$KUBE_SOURCE_VERSION
BIN=$CACHE/bin
NODE_NAME=runlet-node
POD_SUBNET=198.18.0.0/24
NODE_IP=198.18.0.1
BRIDGE=runlet0
# The sandbox ("pause") image: upstream's pause.c from the same source tree, compiled static.
PAUSE_IMAGE=registry.test/runlet-pause:3.4.1
READY_TIMEOUT_SECONDS=${RUNLET_CONTROL_PLANE_READY_TIMEOUT:-120}
CLUSTER_DOMAIN=cluster.local
# The Node 24 that runs node-services.ts: the test runner's (node.ts passes it), else the repo's pinned one.
NODE_BIN=${RUNLET_NODE:-$HERE/../../node_modules/.bin/node}

log() { printf '[node] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
as_root() {
  if [[ $EUID -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else die "need root for: $*"; fi
}

# --- install -----------------------------------------------------------------------------------------

install_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v socat >/dev/null || missing+=(socat)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v nsenter >/dev/null || missing+=(util-linux)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v podman >/dev/null || missing+=(podman)
  command -v gcc >/dev/null || missing+=(gcc)
  [[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}")
  as_root "${install[@]}" >/dev/null 2>&1 || { as_root apt-get update -qq && as_root "${install[@]}" >/dev/null; } \
    || die "apt-get install ${missing[*]} failed"
}

# The pause image as an OCI archive in the cache, for `ctr images import`.
pause_archive() {
  local archive=$CACHE/images/runlet-pause.tar
  [[ -s $archive ]] && { echo "$archive"; return; }
  local source=$CACHE/src/$KUBE_UPSTREAM_DIR/build/pause/linux/pause.c work
  [[ -f $source ]] || die "no $source: run control-plane.sh build first"
  work=$(mktemp -d)
  gcc -Os -Wall -Werror -static -DVERSION=v3.4.1-runlet -o "$work/pause" "$source"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$work/Dockerfile"
  podman build --quiet --tag "$PAUSE_IMAGE" "$work" >/dev/null 2>&1 || die "podman build of the pause image failed"
  mkdir -p "$(dirname "$archive")"
  podman save --quiet --format oci-archive --output "$archive.partial" "$PAUSE_IMAGE" >/dev/null
  mv "$archive.partial" "$archive"
  rm -rf "$work"
  echo "$archive"
}

install() {
  install_packages
  local name
  for name in kubelet kube-proxy; do [[ -x $BIN/$name ]] || die "$BIN/$name is not built: run control-plane.sh build"; done
  pause_archive >/dev/null
}

# --- up / down ---------------------------------------------------------------------------------------

certificate() {
  local pki=$1 name=$2 subject=$3 extensions=$4
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n%s\n' "$extensions" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
    -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
}

kubeconfig() {
  local cp=$1 name=$2 port=$3
  cat >"$cp/node/$name.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: runlet-control-plane
    cluster: { server: "https://127.0.0.1:$port", certificate-authority: "$cp/pki/ca.crt" }
users:
  - name: $name
    user: { client-certificate: "$cp/pki/$name.crt", client-key: "$cp/pki/$name.key" }
contexts:
  - name: $name
    context: { cluster: runlet-control-plane, user: $name }
current-context: $name
KUBECONFIG
}

write_configs() {
  local cp=$1 node=$1/node port=$2
  certificate "$cp/pki" kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "extendedKeyUsage=clientAuth,serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
  certificate "$cp/pki" kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  kubeconfig "$cp" kubelet "$port"
  kubeconfig "$cp" kube-proxy "$port"
  mkdir -p "$node/cni" "$node/containerd" "$node/kubelet"
  cat >"$node/containerd.toml" <<TOML
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$node/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  # Pods' network namespaces under the state directory, not the machine's /run/netns: down unmounts them there.
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node/cni"
TOML
  cat >"$node/cni/10-runlet.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "runlet",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$node/cni-ipam",
        "ranges": [[{ "subnet": "$POD_SUBNET", "gateway": "$NODE_IP" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    }
  ]
}
JSON
  # No nameserver: the namespace has no DNS to reach, and pods must not try the machine's.
  printf 'search svc.cluster.local cluster.local\noptions ndots:5\n' >"$node/resolv.conf"
  cat >"$node/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $cp/pki/kubelet.crt
tlsPrivateKeyFile: $cp/pki/kubelet.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $cp/pki/ca.crt }
authorization: { mode: Webhook }
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
resolvConf: $node/resolv.conf
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$NODE_IP]
# The images are imported, never pulled: no garbage collection may remove one, no eviction a pod for a disk
# that the whole machine shares.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%" }
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 0s
YAML
  cat >"$node/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: $node/kube-proxy.kubeconfig }
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_SUBNET
mode: iptables
# Zero: leave the machine's conntrack sysctls alone (the namespace may not write them).
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
YAML
}

# The namespace: the bridge with the node's address (the CNI plugin adopts it), a loopback, and a default
# route onto the bridge, where nothing answers for an address that is not a pod's (the kubelet picks its
# addresses by the default route).
make_namespace() {
  local netns=$1
  ip netns add "$netns"
  ip -n "$netns" link set lo up
  ip -n "$netns" link add "$BRIDGE" type bridge
  ip -n "$netns" addr add "$NODE_IP/24" dev "$BRIDGE"
  ip -n "$netns" link set "$BRIDGE" up
  ip -n "$netns" route add default dev "$BRIDGE"
}

in_netns() { nsenter --net="/run/netns/$NETNS" "$@"; }

# The cluster DNS and the API server's egress proxy (node-services.ts), inside the namespace; returns once the
# proxy's socket is there (the DNS listens before it).
start_node_services() {
  local cp=$1 node=$1/node deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
  [[ -x $NODE_BIN ]] || { echo "no node binary at $NODE_BIN (RUNLET_NODE)"; kill -TERM 0; }
  rm -f "$cp/cluster-egress.sock"
  in_netns "$NODE_BIN" "$HERE/node-services.ts" --kubeconfig "$node/kube-proxy.kubeconfig" --dns-address "$NODE_IP" \
    --cluster-domain "$CLUSTER_DOMAIN" --egress-socket "$cp/cluster-egress.sock" >"$node/logs/node-services.log" 2>&1 &
  local pid=$!
  until [[ -S $cp/cluster-egress.sock ]]; do
    kill -0 "$pid" 2>/dev/null || { echo "node-services exited: $(tail -n 5 "$node/logs/node-services.log")"; kill -TERM 0; }
    ((SECONDS < deadline)) || { echo "node-services not listening within ${READY_TIMEOUT_SECONDS} s"; kill -TERM 0; }
    sleep 0.2
  done
}

# Runs in its own process group (setsid): every component as a child; when one exits, or the owner process
# (RUNLET_CONTROL_PLANE_OWNER_PID) is gone, the whole group goes.
supervise() {
  local cp=$1 node=$1/node
  # shellcheck source=/dev/null
  source "$cp/ports"
  # shellcheck source=/dev/null
  source "$node/env"
  local logs=$node/logs
  socat "UNIX-LISTEN:$node/apiserver.sock,fork,unlink-early" "TCP:127.0.0.1:$APISERVER_PORT" 2>>"$logs/relay.log" &
  in_netns socat "TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$node/apiserver.sock" 2>>"$logs/relay.log" &
  in_netns socat "TCP-LISTEN:$APISERVER_PORT,bind=$NODE_IP,fork,reuseaddr" "UNIX-CONNECT:$node/apiserver.sock" 2>>"$logs/relay.log" &
  start_node_services "$cp"
  in_netns containerd --config "$node/containerd.toml" >"$logs/containerd.log" 2>&1 &
  local deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
  until ctr --address "$node/containerd.sock" version >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { echo "containerd did not answer within ${READY_TIMEOUT_SECONDS} s"; kill -TERM 0; }
    sleep 0.2
  done
  echo "containerd ready"
  touch "$node/containerd.ready"
  until [[ -f $node/images.loaded ]]; do
    ((SECONDS < deadline + READY_TIMEOUT_SECONDS)) || { echo "the images were not imported in time"; kill -TERM 0; }
    sleep 0.2
  done
  in_netns "$BIN/kubelet" --config "$node/kubelet.yaml" --kubeconfig "$node/kubelet.kubeconfig" \
    --container-runtime remote --container-runtime-endpoint "unix://$node/containerd.sock" \
    --pod-infra-container-image "$PAUSE_IMAGE" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --root-dir "$node/kubelet" --cert-dir "$node/kubelet/pki" --logtostderr -v 1 >"$logs/kubelet.log" 2>&1 &
  echo $! >"$node/kubelet.pid"
  in_netns "$BIN/kube-proxy" --config "$node/kube-proxy.yaml" --logtostderr -v 1 >"$logs/kube-proxy.log" 2>&1 &
  local owner=${RUNLET_CONTROL_PLANE_OWNER_PID:-}
  if [[ -n $owner ]]; then
    # An owner gone without `down` (a killed test run) leaves no container, mount or namespace behind: `down`
    # runs in a session of its own, since it ends this group.
    (while kill -0 "$owner" 2>/dev/null; do sleep 2; done
      echo "owner process $owner exited; taking the node down"
      setsid "$0" down "$cp" </dev/null >/dev/null 2>&1 &) &
  fi
  wait -n || true
  echo "a component (or the owner watch) exited; stopping the node"
  kill_containers "$node"
  kill -TERM 0
}

# The images' archives are cached by image id (an unchanged image is not exported again), the newest few kept.
import_images() {
  local node=$1 archive name id
  shift
  ctr --address "$node/containerd.sock" -n k8s.io images import "$(pause_archive)" >/dev/null \
    || die "importing the pause image failed"
  mkdir -p "$CACHE/images"
  for name in "$@"; do
    id=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null) || die "podman has no image $name (make images)"
    archive=$CACHE/images/$(printf '%s' "$name" | tr '/:' '__')-${id:0:12}.tar
    if [[ ! -s $archive ]]; then
      rm -f "$CACHE/images/$(printf '%s' "$name" | tr '/:' '__')"-*.tar
      # podman writes the names as podman knows them (docker.io/…): the names a Kubernetes image field means.
      podman save --quiet --format oci-archive --output "$archive.partial" "$name" || die "podman save $name failed"
      mv "$archive.partial" "$archive"
    fi
    ctr --address "$node/containerd.sock" -n k8s.io images import "$archive" >/dev/null || die "importing $name into containerd failed"
  done
  touch "$node/images.loaded"
}

up() {
  local cp=$1 node=$1/node
  shift
  [[ -f $cp/ports ]] || die "no control plane in $cp (control-plane.sh up $cp)"
  install
  # shellcheck source=/dev/null
  source "$cp/ports"
  rm -rf "$node" && mkdir -p "$node/logs"
  local started=$SECONDS
  NETNS=runlet-node-$(printf '%s' "$cp" | sha256sum | cut -c1-8)
  printf 'NETNS=%s\n' "$NETNS" >"$node/env"
  if [[ -e /run/netns/$NETNS ]]; then ip netns delete "$NETNS"; fi
  write_configs "$cp" "$APISERVER_PORT"
  make_namespace "$NETNS"
  setsid "$0" _supervise "$cp" </dev/null >>"$node/logs/supervisor.log" 2>&1 &
  echo $! >"$node/pgid"
  local deadline=$((SECONDS + READY_TIMEOUT_SECONDS))
  until [[ -f $node/containerd.ready ]]; do
    kill -0 "$(cat "$node/pgid")" 2>/dev/null || die "the node stopped: $(tail -n 3 "$node/logs/supervisor.log")"
    ((SECONDS < deadline)) || die "containerd not ready within ${READY_TIMEOUT_SECONDS} s; logs in $node/logs"
    sleep 0.2
  done
  local imported=$SECONDS
  import_images "$node" "$@"
  log "images imported in $((SECONDS - imported)) s"
  until KUBECONFIG=$cp/admin.kubeconfig "$BIN/kubectl" get node "$NODE_NAME" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; do
    kill -0 "$(cat "$node/pgid")" 2>/dev/null || die "the node stopped: $(tail -n 3 "$node/logs/supervisor.log")"
    ((SECONDS < deadline + READY_TIMEOUT_SECONDS)) || die "node $NODE_NAME not Ready in time; logs in $node/logs"
    sleep 0.5
  done
  log "node $NODE_NAME ready in $((SECONDS - started)) s (namespace $NETNS, logs in $node/logs)"
  echo "/run/netns/$NETNS"
}

# Unmounts whatever the kubelet and containerd mounted under DIR (tokens, emptyDirs, rootfs), deepest first.
unmount_under() {
  local dir=$1 target
  awk -v dir="$dir" '$5 == dir || index($5, dir "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r target; do
    umount -l "$target" 2>/dev/null || true
  done
}

# Every container's processes, by the init pid runc wrote in its bundle: each container has a PID namespace of
# its own, so killing its init ends it all. By pid, not through containerd, which may be gone already.
kill_containers() {
  local node=$1 pidfile
  for pidfile in "$node"/containerd/state/io.containerd.runtime.v2.task/k8s.io/*/init.pid; do
    [[ -f $pidfile ]] && kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  done
  return 0
}

# The shims run in sessions of their own, outside the supervisor's group: those serving this node's containerd.
kill_shims() {
  local node=$1 pid
  for pid in $(pgrep -f -- "containerd-shim-runc-v2 .*-address $node/containerd.sock( |$)" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
}

# The kubelet writes pod logs under /var/log/pods (not configurable in 1.20) and links them from
# /var/log/containers: those of this node's pods go with it.
remove_pod_logs() {
  local node=$1 dir link
  # This node's pods: those still in its kubelet's directory, and those its kubelet's log names (deleted ones).
  for dir in /var/log/pods/*_*; do
    [[ -d $dir ]] || continue
    local uid=${dir##*_}
    if [[ -d $node/kubelet/pods/$uid ]] || grep -qF -- "$uid" "$node/logs/kubelet.log" 2>/dev/null; then rm -rf "$dir"; fi
  done
  for link in /var/log/containers/*.log; do
    [[ -L $link && ! -e $link ]] && rm -f "$link"
  done
  return 0
}

down() {
  local cp=$1 node=$1/node pgid
  [[ -d $node ]] || return 0
  kill_containers "$node"
  if [[ -f $node/pgid ]]; then
    pgid=$(cat "$node/pgid")
    kill -TERM -- "-$pgid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 -- "-$pgid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    kill -KILL -- "-$pgid" 2>/dev/null || true
  fi
  # Again: the kubelet may have started one while the first were killed.
  kill_containers "$node"
  kill_shims "$node"
  unmount_under "$node"
  remove_pod_logs "$node"
  # shellcheck source=/dev/null
  if [[ -f $node/env ]]; then source "$node/env"; ip netns delete "$NETNS" 2>/dev/null || true; fi
  rm -rf "$node"
  log "stopped"
}

case "${1:-}" in
  install) install ;;
  up) shift; up "$@" ;;
  down) down "${2:?usage: node.sh down CP_DIR}" ;;
  _supervise) NETNS=$(sed -n 's/^NETNS=//p' "$2/node/env") supervise "$2" ;;
  *)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
