#!/usr/bin/env bash
# A single-node Kubernetes for test/k8s (make test-k8s), built from the
# registries this machine reaches: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy and kubectl from k8s.io/kubernetes
# ($VERSION, the module test/stack/k8s pins; ~6 min cold on 2 cores, cached
# as $STACK_DIR/bin/k8s-$VERSION/), etcd, containerd, runc, the CNI plugins and
# nftables from Debian, a pause image built here FROM scratch. Everything lives
# under $STACK_DIR/k8s and is stopped by the PIDs it recorded.
#
# The network, so that no packet can leave the machine (docs/evidence/kubernetes.md):
# - the bridge $BRIDGE with $GATEWAY/24 is created (and the pod and service ranges
#   routed onto it) before any component starts: the pod range is never routed
#   out of eth0, not even for the kubelet's first probe;
# - the CNI bridge plugin gives pods a route to the service range only, no
#   default route;
# - an nftables table ($GUARD) drops anything forwarded between the bridge and
#   another interface, and any host packet to the pod or service range that is
#   routed anywhere but the bridge or loopback;
# - containerd runs with HTTP(S)_PROXY=127.0.0.1:9: an image that was not
#   imported fails at once instead of resolving a registry;
# - the API server and the kubelet listen on $GATEWAY, an address that exists
#   only on this host; etcd, the controllers' ports and healthz on 127.0.0.1.
# Pods reach the stores (which stay on 127.0.0.1) through forwarders on $GATEWAY
# that the tests start (test/k8s uses toxiproxy: it can also cut them).
#
# Usage: k8s.sh install|start|stop|status|env|kubectl ARGS...|import IMAGE...
#   import: podman save IMAGE (from podman's store) | ctr import into the node
source "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MOD=$ROOT/test/stack/k8s
VERSION=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$MOD/go.mod")
DIR=$STACK_DIR/k8s
BIN=$STACK_DIR/bin/k8s-$VERSION
NODE=${DBCANARY_K8S_NODE:-dbcanary-k8s}
BRIDGE=${DBCANARY_K8S_BRIDGE:-dbck8s0}
POD_CIDR=${DBCANARY_K8S_POD_CIDR:-10.244.0.0/24}
GATEWAY=${POD_CIDR%.*}.1
SERVICE_CIDR=${DBCANARY_K8S_SERVICE_CIDR:-10.96.0.0/16}
API_PORT=${DBCANARY_K8S_API_PORT:-16443}
ETCD_PORT=${DBCANARY_K8S_ETCD_PORT:-23791}
ETCD_PEER_PORT=$((ETCD_PORT + 10))
KUBELET_PORT=${DBCANARY_K8S_KUBELET_PORT:-20250}
GUARD=dbcanary_k8s_guard
SOCK=$DIR/run/containerd.sock
PAUSE_IMAGE=registry.k8s.io/pause:3.10
KUBECONFIG_ADMIN=$DIR/kc/admin.kubeconfig
# Paths the components use outside $DIR whatever their flags say; removed on
# stop when start found them absent (listed in $DIR/outside-paths).
OUTSIDE_PATHS="/var/lib/kubelet/device-plugins /var/lib/kubelet /var/log/containers /var/log/pods /run/containerd/s /run/containerd/runc /run/containerd"
COMPONENTS="etcd containerd apiserver controller-manager scheduler kubelet proxy"

kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

install() {
  apt_install etcd-server containerd runc containernetworking-plugins nftables openssl iproute2 podman ca-certificates
  if [ ! -x "$BIN/kubectl" ] || [ "$(cat "$BIN/version" 2>/dev/null)" != "$VERSION" ]; then
    local minor=${VERSION#v1.}; minor=${minor%%.*}
    # Without these every binary says v0.0.0-master: kubectl version and the
    # chart's kubeVersion check fail.
    local ld="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/component-base/version.gitMajor=1"
    ld="$ld -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$VERSION"
    ld="$ld -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
    log "k8s: building Kubernetes $VERSION from the Go module proxy (about 6 min cold on 2 cores)"
    mkdir -p "$BIN.tmp"
    (cd "$MOD" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod go build -trimpath -ldflags "$ld" -o "$BIN.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl)
    (cd "$MOD" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w" -o "$BIN.tmp/pause" ./pause)
    echo "$VERSION" > "$BIN.tmp/version"
    rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
    rm -f "$DIR/img/pause.tar"
    log "k8s: installed $BIN"
  fi
  if [ ! -s "$DIR/img/pause.tar" ]; then
    mkdir -p "$DIR/img"
    local ctx; ctx=$(mktemp -d "${TMPDIR:-/tmp}/dbcanary-pause.XXXXXX")
    cp "$BIN/pause" "$ctx/pause"
    printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$ctx/Containerfile"
    eval "$(bash "$ROOT/test/tools/podman.sh" env)"
    podman build --quiet --pull=never --layers=false -t "$PAUSE_IMAGE" "$ctx" >/dev/null
    podman save --quiet --format docker-archive -o "$DIR/img/pause.tar.tmp" "$PAUSE_IMAGE" >/dev/null
    mv "$DIR/img/pause.tar.tmp" "$DIR/img/pause.tar"
    rm -rf "$ctx"
  fi
}

# pki: a CA, the serving and client certificates and the kubeconfigs, made once.
pki() {
  local p=$DIR/pki
  [ -s "$p/done" ] && return 0
  rm -rf "$p" "$DIR/kc"; mkdir -p "$p" "$DIR/kc"; chmod 700 "$p"
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$p/ca.key" -subj /CN=dbcanary-k8s-ca -days 3650 -out "$p/ca.crt" 2>/dev/null
  # The service-account signing key: RSA, the key type every client accepts.
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  local svc_ip; svc_ip=$(svc_first_ip)
  cert apiserver kube-apiserver "" serverAuth "IP:$GATEWAY,IP:127.0.0.1,IP:$svc_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth ""
  cert admin admin system:masters clientAuth ""
  cert controller-manager system:kube-controller-manager "" clientAuth ""
  cert scheduler system:kube-scheduler "" clientAuth ""
  cert kubelet "system:node:$NODE" system:nodes clientAuth ""
  cert proxy system:kube-proxy "" clientAuth ""
  local n
  for n in admin controller-manager scheduler kubelet proxy; do
    cat > "$DIR/kc/$n.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: dbcanary-k8s
  cluster: {server: "https://$GATEWAY:$API_PORT", certificate-authority: "$p/ca.crt"}
users:
- name: $n
  user: {client-certificate: "$p/$n.crt", client-key: "$p/$n.key"}
contexts:
- name: dbcanary-k8s
  context: {cluster: dbcanary-k8s, user: $n}
current-context: dbcanary-k8s
EOF
  done
  date -u +%FT%TZ > "$p/done"
}

# cert NAME CN O EKU SANS: a key and a certificate signed by the CA.
cert() {
  local p=$DIR/pki name=$1 cn=$2 o=$3 eku=$4 sans=$5
  openssl ecparam -name prime256v1 -genkey -noout -out "$p/$name.key" 2>/dev/null
  openssl req -new -key "$p/$name.key" -subj "/CN=$cn${o:+/O=$o}" -out "$p/$name.csr" 2>/dev/null
  {
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $eku"
    [ -n "$sans" ] && echo "subjectAltName = $sans"
  } > "$p/$name.ext"
  openssl x509 -req -in "$p/$name.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 3650 \
    -extfile "$p/$name.ext" -out "$p/$name.crt" 2>/dev/null
  rm -f "$p/$name.csr" "$p/$name.ext"
}

# svc_first_ip: the kubernetes Service's ClusterIP (the range's first address).
svc_first_ip() { local net=${SERVICE_CIDR%/*}; echo "${net%.*}.$((${net##*.} + 1))"; }

configs() {
  mkdir -p "$DIR/etc" "$DIR/cni/net.d" "$DIR/cni/ipam"
  cat > "$DIR/etc/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  disable_apparmor = true
  # This VM refuses a negative oom_score_adj (no CAP_SYS_RESOURCE): without
  # this runc fails every sandbox with "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "/usr/sbin/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
EOF
  cat > "$DIR/cni/net.d/10-dbcanary.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "dbcanary",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$GATEWAY"}]],
        "routes": [{"dst": "$SERVICE_CIDR"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
  cat > "$DIR/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $GATEWAY
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT - 2))
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $DIR/pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://$SOCK
staticPodPath: $DIR/kubelet/manifests
podLogsDir: $DIR/kubelet/pod-logs
clusterDomain: cluster.local
clusterDNS: ["$(svc_first_ip | sed 's/\.1$/.10/')"]
resolvConf: "$DIR/etc/resolv.conf"
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: false
makeIPTablesUtilChains: false
serializeImagePulls: false
volumePluginDir: $DIR/kubelet/volume-plugins
EOF
  # Pods with dnsPolicy Default get no name server of this host's (it is not on the bridge).
  printf 'nameserver %s\n' "$GATEWAY" > "$DIR/etc/resolv.conf"
  cat > "$DIR/etc/proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $DIR/kc/proxy.kubeconfig}
hostnameOverride: $NODE
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$((KUBELET_PORT + 6))
metricsBindAddress: 127.0.0.1:$((KUBELET_PORT - 1))
nodePortAddresses: ["$GATEWAY/32"]
nftables: {masqueradeAll: true, syncPeriod: 30s, minSyncPeriod: 1s}
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# network: the bridge, the local routes and the egress guard, before any component.
network() {
  if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
    ip link add "$BRIDGE" type bridge
  fi
  ip addr replace "$GATEWAY/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # Host packets to a ClusterIP are routed onto the bridge (kube-proxy's DNAT
  # then rewrites them); one without a Service rule goes nowhere else.
  ip route replace "$SERVICE_CIDR" dev "$BRIDGE"
  # stop removes the network only where this file says this stack dir made it:
  # a stop of another stack dir (make stack-down, a test's own) leaves it alone.
  echo "$BRIDGE" > "$DIR/network"
  nft -f - <<EOF
table inet $GUARD
delete table inet $GUARD
table inet $GUARD {
  chain forward {
    type filter hook forward priority -10; policy accept;
    iifname "$BRIDGE" oifname != "$BRIDGE" counter drop
    oifname "$BRIDGE" iifname != "$BRIDGE" counter drop
  }
  chain output {
    type filter hook output priority -10; policy accept;
    ip daddr { $POD_CIDR, $SERVICE_CIDR } oifname != { "$BRIDGE", "lo" } counter drop
  }
}
EOF
}

# run NAME CMD...: start a component in the background, its PID in $DIR/pids.
run() {
  local name=$1; shift
  nohup nice -n 5 "$@" >"$DIR/logs/$name.log" 2>&1 9>&- &
  echo $! > "$DIR/pids/$name.pid"
}

# wait_for SECONDS NAME CMD...: poll CMD until it succeeds, failing if NAME died.
wait_for() {
  local secs=$1 name=$2 i=0; shift 2
  until "$@" >/dev/null 2>&1; do
    if ! pid_alive "$DIR/pids/$name.pid"; then tail -n 40 "$DIR/logs/$name.log" >&2; die "k8s: $name exited during startup (log above)"; fi
    i=$((i + 1)); [ "$i" -ge $((secs * 2)) ] && { tail -n 40 "$DIR/logs/$name.log" >&2; die "k8s: $name not ready after ${secs}s"; }
    sleep 0.5
  done
}

running() {
  local c
  for c in $COMPONENTS; do pid_alive "$DIR/pids/$c.pid" || return 1; done
  kubectl_ get --raw /readyz >/dev/null 2>&1
}

start() {
  install
  if running; then log "k8s: already running (https://$GATEWAY:$API_PORT)"; return 0; fi
  local c
  for c in $COMPONENTS; do pid_alive "$DIR/pids/$c.pid" && die "k8s: $c still runs from an earlier start (k8s.sh stop first)"; done
  SECONDS=0
  pki
  configs
  # A new cluster every start: no state of an earlier one (the images are imported again).
  rm -rf "$DIR/etcd" "$DIR/containerd" "$DIR/kubelet" "$DIR/cni/ipam" "$DIR/logs" "$DIR/pids"
  mkdir -p "$DIR/etcd" "$DIR/containerd" "$DIR/kubelet/manifests" "$DIR/kubelet/pod-logs" "$DIR/kubelet/volume-plugins" \
    "$DIR/kcm-flex" "$DIR/run" "$DIR/pids" "$DIR/logs" "$DIR/cni/ipam"
  chmod 700 "$DIR/etcd"
  : > "$DIR/outside-paths"
  for c in $OUTSIDE_PATHS; do [ -e "$c" ] || echo "$c" >> "$DIR/outside-paths"; done
  network
  run etcd etcd --name dbcanary-k8s --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "dbcanary-k8s=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "http://127.0.0.1:$((ETCD_PORT + 20))"
  run containerd env HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=localhost,127.0.0.1 \
    containerd --config "$DIR/etc/containerd.toml"
  wait_for 60 etcd port_open 127.0.0.1 "$ETCD_PORT"
  local p=$DIR/pki
  run apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$GATEWAY" --advertise-address="$GATEWAY" --secure-port="$API_PORT" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" --kubelet-client-key="$p/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP --allow-privileged=true --profiling=false
  wait_for 60 containerd test -S "$SOCK"
  ctr -a "$SOCK" -n k8s.io images import "$DIR/img/pause.tar" >/dev/null
  wait_for 120 apiserver kubectl_ get --raw /readyz
  log "k8s: API server ready after ${SECONDS}s"
  run controller-manager "$BIN/kube-controller-manager" --kubeconfig="$DIR/kc/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$DIR/kc/controller-manager.kubeconfig" --authorization-kubeconfig="$DIR/kc/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=$((KUBELET_PORT + 7)) --leader-elect=false \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" --use-service-account-credentials=true \
    --cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --flex-volume-plugin-dir="$DIR/kcm-flex"
  run scheduler "$BIN/kube-scheduler" --kubeconfig="$DIR/kc/scheduler.kubeconfig" \
    --authentication-kubeconfig="$DIR/kc/scheduler.kubeconfig" --authorization-kubeconfig="$DIR/kc/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=$((KUBELET_PORT + 9)) --leader-elect=false
  run kubelet "$BIN/kubelet" --config="$DIR/etc/kubelet.yaml" --kubeconfig="$DIR/kc/kubelet.kubeconfig" \
    --root-dir="$DIR/kubelet/root" --cert-dir="$DIR/kubelet/pki" --hostname-override="$NODE" --node-ip="$GATEWAY" --v=1
  run proxy "$BIN/kube-proxy" --config="$DIR/etc/proxy.yaml" --v=1
  wait_for 120 kubelet kubectl_ wait --for=condition=Ready "node/$NODE" --timeout=1s
  wait_for 60 controller-manager kubectl_ get serviceaccount default
  log "k8s: node $NODE Ready after ${SECONDS}s (KUBECONFIG=$KUBECONFIG_ADMIN)"
}

stop() {
  # 1. The kubelet tears the pods down (volumes, CNI DEL) while it still can.
  if pid_alive "$DIR/pids/kubelet.pid" && kubectl_ get --raw /readyz >/dev/null 2>&1; then
    local ns
    for ns in $(kubectl_ get namespaces -o name 2>/dev/null | sed 's#namespace/##'); do
      kubectl_ -n "$ns" delete deploy,sts,ds,rs,job,pod --all --grace-period=1 --wait=true --timeout=60s >/dev/null 2>&1 || true
    done
  fi
  local c
  for c in controller-manager scheduler kubelet proxy; do stop_pid "$DIR/pids/$c.pid" "$c" 20; done
  # 2. What containerd still runs (its shims exit with their tasks); their network namespaces.
  local netns=""
  if [ -S "$SOCK" ] && pid_alive "$DIR/pids/containerd.pid"; then
    for c in $(ctr -a "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do
      netns="$netns $(ctr -a "$SOCK" -n k8s.io containers info "$c" 2>/dev/null | grep -o '/var/run/netns/cni-[0-9a-f-]*' | head -1 || true)"
    done
    for c in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$SOCK" -n k8s.io tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do ctr -a "$SOCK" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr -a "$SOCK" -n k8s.io containers ls -q 2>/dev/null); do ctr -a "$SOCK" -n k8s.io containers rm "$c" >/dev/null 2>&1 || true; done
  fi
  for c in containerd apiserver etcd; do stop_pid "$DIR/pids/$c.pid" "$c" 30; done
  # 3. Mounts under $DIR, the pods' namespaces, kube-proxy's tables, the guard, the bridge.
  { mount | awk '{print $3}' | grep "^$DIR/" || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  for c in $netns; do [ -e "$c" ] && { ip netns del "$(basename "$c")" 2>/dev/null || true; }; done
  if [ "$(cat "$DIR/network" 2>/dev/null)" = "$BRIDGE" ]; then
    for c in ip ip6; do nft delete table "$c" kube-proxy 2>/dev/null || true; done
    nft delete table inet "$GUARD" 2>/dev/null || true
    ip route del "$SERVICE_CIDR" dev "$BRIDGE" 2>/dev/null || true
    ip link del "$BRIDGE" 2>/dev/null || true
    rm -f "$DIR/network"
  fi
  # 4. The paths outside $DIR that this cluster created (listed at start).
  if [ -s "$DIR/outside-paths" ]; then
    while read -r c; do
      # /run/containerd/s may keep its shims' sockets until they exit: lazily.
      [ -e "$c" ] && { rm -rf "$c" 2>/dev/null || log "k8s: could not remove $c"; }
    done < "$DIR/outside-paths"
    rm -f "$DIR/outside-paths"
  fi
  return 0
}

status() { running; }

env_() {
  echo "KUBECONFIG=$KUBECONFIG_ADMIN"
  echo "DBCANARY_K8S_BIN=$BIN"
  echo "DBCANARY_K8S_VERSION=$VERSION"
  echo "DBCANARY_K8S_NODE=$NODE"
  echo "DBCANARY_K8S_GATEWAY=$GATEWAY"
  echo "DBCANARY_K8S_CONTAINERD_SOCK=$SOCK"
}

# import IMAGE...: podman's image into the node's containerd (no registry).
import() {
  eval "$(bash "$ROOT/test/tools/podman.sh" env)"
  local img tar
  for img in "$@"; do
    tar=$(mktemp "${TMPDIR:-/tmp}/dbcanary-k8s-image.XXXXXX")
    podman save --quiet --format docker-archive -o "$tar" "$img" >/dev/null
    ctr -a "$SOCK" -n k8s.io images import "$tar" >/dev/null
    rm -f "$tar"
    log "k8s: imported $img"
  done
}

case "${1:-}" in
  install) stack_lock k8s; install ;;
  start) stack_lock k8s; start ;;
  stop) stack_lock k8s; stop ;;
  status) status ;;
  env) env_ ;;
  kubectl) shift; kubectl_ "$@" ;;
  import) shift; import "$@" ;;
  *) echo "usage: $0 install|start|stop|status|env|kubectl ARGS...|import IMAGE..." >&2; exit 2 ;;
esac
