#!/usr/bin/env bash
# prometheus-operator, its prometheus-config-reloader and Alertmanager for
# test/k8s (make test-k8s), built once from the Go module proxy and cached as
# $STACK_DIR/bin/prometheus-operator-$VERSION/{operator,prometheus-config-reloader}
# and $STACK_DIR/bin/alertmanager-$AM_VERSION; the operator's CRDs are those of
# its module (example/prometheus-operator-crd). `go install` refuses the
# operator (replace directives pointing at its nested modules, which the
# module zip leaves out): it is built in a copy of the module source with
# those replace directives dropped, so the nested modules come from the proxy
# at the same version. Nothing is started.
# Usage: prometheus-operator.sh install|path|reloader-path|alertmanager-path|crds|version
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
AM_VERSION=${DBCANARY_K8S_ALERTMANAGER_VERSION:-v0.31.1}
MOD=github.com/prometheus-operator/prometheus-operator
DIR=$STACK_DIR/prometheus-operator
OUT=$STACK_DIR/bin/prometheus-operator-$VERSION
AM=$STACK_DIR/bin/alertmanager-$AM_VERSION

# src: the module's source directory in the module cache (downloaded if needed).
src() {
  (cd "$DIR" && GOFLAGS=-mod=mod go mod download -json "$MOD@$VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

install() {
  mkdir -p "$DIR" "$STACK_DIR/bin"
  if [ ! -x "$OUT/operator" ] || [ ! -x "$OUT/prometheus-config-reloader" ]; then
    local s; s=$(src)
    [ -n "$s" ] && [ -d "$s" ] || die "prometheus-operator: go mod download gave no source directory"
    log "prometheus-operator: building $VERSION (operator, prometheus-config-reloader) from the Go module proxy"
    rm -rf "$DIR/src" "$OUT.tmp"
    cp -r "$s" "$DIR/src" && chmod -R u+w "$DIR/src"
    (cd "$DIR/src" && go mod edit -dropreplace "$MOD/pkg/apis/monitoring" -dropreplace "$MOD/pkg/client" &&
      CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=mod go build -trimpath \
        -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION#v}" \
        -o "$OUT.tmp/" ./cmd/operator ./cmd/prometheus-config-reloader)
    rm -rf "$OUT" && mv "$OUT.tmp" "$OUT" && rm -rf "$DIR/src"
    log "prometheus-operator: installed $OUT"
  fi
  if [ ! -x "$AM" ]; then
    log "prometheus-operator: building alertmanager $AM_VERSION from the Go module proxy"
    CGO_ENABLED=0 GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "github.com/prometheus/alertmanager/cmd/alertmanager@$AM_VERSION"
    mv "$DIR/gobin/alertmanager" "$AM.tmp" && mv "$AM.tmp" "$AM"
  fi
}

case "${1:-}" in
  install) stack_lock prometheus-operator; install; echo "$OUT/operator" ;;
  path) echo "$OUT/operator" ;;
  reloader-path) echo "$OUT/prometheus-config-reloader" ;;
  alertmanager-path) echo "$AM" ;;
  crds) mkdir -p "$DIR"; echo "$(src)/example/prometheus-operator-crd" ;;
  version) echo "$VERSION" ;;
  *) echo "usage: $0 install|path|reloader-path|alertmanager-path|crds|version" >&2; exit 2 ;;
esac
