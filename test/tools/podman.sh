#!/usr/bin/env bash
# Podman (builds and runs the dbcanary image with no Docker daemon and no
# registry), from Debian, with the settings this kind of VM needs: runc rather
# than crun (crun cannot set RLIMIT_NOFILE here and refuses hybrid cgroups),
# no default ulimits, and the cgroupfs cgroup manager (no systemd). Those live
# in a containers.conf of our own; `env` prints the CONTAINERS_CONF to export.
# Also installs Debian's ca-certificates: the image ships the host's bundle.
# Usage: podman.sh install|env|version (stop and status for the stack loops)
#   eval "$(bash test/tools/podman.sh env)"; podman build ...; podman run --network host ...
source "$(dirname "$0")/../stack/lib.sh"

DIR=$STACK_DIR/podman
CONF=$DIR/containers.conf

install() {
  # apt may be busy with another install (make deps runs the stack scripts one
  # by one, but people and tests run them too): retry for a few minutes.
  local i=0
  until (apt_install podman runc ca-certificates); do
    i=$((i + 1)); [ "$i" -ge 60 ] && die "podman: apt-get install failed (see above)"
    log "podman: apt is busy or failed, retrying in 5s ($i/60)"
    sleep 5
  done
  [ -s /etc/ssl/certs/ca-certificates.crt ] || die "podman: /etc/ssl/certs/ca-certificates.crt is missing (Debian package ca-certificates)"
  mkdir -p "$DIR"
  # Written every time (cheap) so a changed setting reaches an existing cache.
  cat > "$CONF.tmp" <<'CONF'
# dbcanary's containers.conf (test/tools/podman.sh): what podman needs on a VM
# with hybrid cgroups, no systemd cgroup manager and no CAP_SYS_RESOURCE.
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
CONF
  mv "$CONF.tmp" "$CONF"
}

env_() {
  echo "export CONTAINERS_CONF=$CONF"
}

case "${1:-}" in
  install) install; env_ ;;
  env) install; env_ ;;
  version) install; CONTAINERS_CONF=$CONF podman --version ;;
  stop) ;;
  status) command -v podman >/dev/null && [ -s "$CONF" ] ;;
  *) echo "usage: $0 install|env|version|stop|status" >&2; exit 2 ;;
esac
