#!/usr/bin/env bash
# build.sh BINARY TAG [PODMAN BUILD ARGS...]: the dbcanary image from a static
# binary, with podman (installed and configured by test/tools/podman.sh) and
# deploy/image/Containerfile: no Docker daemon, no registry (FROM scratch).
# VERSION and REVISION from the environment become the image's labels.
# Prints the tag.
#   make image                      # bin/dbcanary -> dbcanary:$(VERSION)
#   deploy/image/build.sh dist/dbcanary_linux_arm64_v8.0/dbcanary ghcr.io/dbcanary/dbcanary:0.1.0-arm64 --platform linux/arm64
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:?usage: build.sh BINARY TAG [PODMAN BUILD ARGS...]}
tag=${2:?usage: build.sh BINARY TAG [PODMAN BUILD ARGS...]}
shift 2

[ -x "$bin" ] || { echo "build.sh: $bin is not an executable (make build)" >&2; exit 1; }
# The base is empty: a binary that needs a dynamic loader cannot run there.
if ldd "$bin" >/dev/null 2>&1; then echo "build.sh: $bin is dynamically linked (build it with CGO_ENABLED=0: make build)" >&2; exit 1; fi

# DBCANARY_SYSTEM_PODMAN=1: use the podman this host has as it is configured
# (a GitHub runner); otherwise install and configure it (Debian, this repo's way).
if [ "${DBCANARY_SYSTEM_PODMAN:-0}" != 1 ]; then
  eval "$(bash "$root/test/tools/podman.sh" env)"
fi
ctx=$(mktemp -d "${TMPDIR:-/tmp}/dbcanary-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
bash "$here/rootfs.sh" "$ctx/rootfs"
install -m 0755 "$bin" "$ctx/dbcanary"

podman build --quiet --pull=never --layers=false -f "$here/Containerfile" \
  --build-arg VERSION="${VERSION:-dev}" --build-arg REVISION="${REVISION:-unknown}" \
  -t "$tag" "$@" "$ctx" >/dev/null
echo "$tag"
