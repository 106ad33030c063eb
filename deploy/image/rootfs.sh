#!/usr/bin/env bash
# rootfs.sh DIR: the files dbcanary's image holds besides the binary, laid out
# under DIR as they sit in the image: /etc/passwd and /etc/group naming the
# non-root user nonroot (65532), and the build host's CA bundle (Debian's
# ca-certificates package) at /etc/ssl/certs/ca-certificates.crt, where Go's
# crypto/x509 looks first on Linux. Nothing else: no shell, no libc, no tzdata.
# Used by deploy/image/build.sh (podman, this repository's tested path) and by
# the Dockerfile's build stage, so both produce the same image.
set -euo pipefail

dir=${1:?usage: rootfs.sh DIR}
ca=${DBCANARY_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$ca" ] || { echo "rootfs.sh: no CA bundle at $ca (install Debian's ca-certificates)" >&2; exit 1; }

install -d -m 0755 "$dir/etc" "$dir/etc/ssl" "$dir/etc/ssl/certs"
# Same names and ids as distroless's nonroot images; no login shell, no home.
printf '%s\n' \
  'root:x:0:0:root:/root:/sbin/nologin' \
  'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' > "$dir/etc/passwd"
printf '%s\n' \
  'root:x:0:' \
  'nonroot:x:65532:' > "$dir/etc/group"
install -m 0644 "$ca" "$dir/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$dir/etc/passwd" "$dir/etc/group"
