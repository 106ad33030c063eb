#!/usr/bin/env bash
# Helm (chart rendering, lint and package for test/deploy) and helm-docs (the chart's
# README.md from values.yaml), built once from the Go module proxy and cached as
# $STACK_DIR/bin/helm-$VERSION and $STACK_DIR/bin/helm-docs-$DOCS_VERSION; nothing is started.
# Usage: helm.sh install|path|docs|docs-path|version (a tool: nothing is started;
# path and docs-path print where install puts helm and helm-docs, without installing)
#   install builds both and prints helm's path; docs builds helm-docs and prints its path.
source "$(dirname "$0")/../stack/lib.sh"

VERSION=${DBCANARY_HELM_VERSION:-v3.22.0}
DOCS_VERSION=${DBCANARY_HELM_DOCS_VERSION:-v1.14.2}
DIR=$STACK_DIR/helm
BIN=$STACK_DIR/bin/helm-$VERSION
DOCS_BIN=$STACK_DIR/bin/helm-docs-$DOCS_VERSION

# build PACKAGE@VERSION NAME DEST: go install into a private GOBIN, then move into place.
build() {
  local pkg=$1 name=$2 dest=$3
  [ -x "$dest" ] && return 0
  mkdir -p "$STACK_DIR/bin" "$DIR/gobin"
  log "helm: building $pkg from the Go module proxy"
  # CGO off: a static binary needs no system libraries.
  CGO_ENABLED=0 GOBIN=$DIR/gobin GOFLAGS=-mod=mod go install "$pkg"
  mv "$DIR/gobin/$name" "$dest.tmp" && mv "$dest.tmp" "$dest"
  log "helm: installed $dest"
}

install_helm() { build "helm.sh/helm/v3/cmd/helm@$VERSION" helm "$BIN"; }
install_docs() { build "github.com/norwoodj/helm-docs/cmd/helm-docs@$DOCS_VERSION" helm-docs "$DOCS_BIN"; }

case "${1:-}" in
  install) install_helm; install_docs; echo "$BIN" ;;
  path) echo "$BIN" ;;
  docs) install_docs; echo "$DOCS_BIN" ;;
  docs-path) echo "$DOCS_BIN" ;;
  version) install_helm; "$BIN" version --short ;;
  *) echo "usage: $0 install|path|docs|docs-path|version" >&2; exit 2 ;;
esac
