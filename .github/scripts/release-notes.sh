#!/usr/bin/env bash
# release-notes.sh VERSION: the gate of a release and its notes. Fails unless
# the Helm chart's version and appVersion are VERSION (the tag without its v:
# the chart, the image tag and the binaries carry one version) and CHANGELOG.md
# has a dated, non-empty section for VERSION; prints it (without its heading), which
# the release workflow hands to goreleaser as the release notes.
# A section is a level-2 heading naming the version, as in Keep a Changelog:
#   ## [0.1.0] - 2026-11-26      or      ## 0.1.0 (2026-11-26)
# CHART_YAML and CHANGELOG override the files (TestReleaseNotes in test/deploy/image_layout_test.go uses them).
set -euo pipefail

version=${1:?usage: release-notes.sh VERSION (the tag without its leading v)}
root=$(cd "$(dirname "$0")/../.." && pwd)
chart=${CHART_YAML:-$root/deploy/helm/dbcanary/Chart.yaml}
changelog=${CHANGELOG:-$root/CHANGELOG.md}

case "$version" in
  v*) echo "release-notes.sh: give the version without its leading v ($version)" >&2; exit 2 ;;
esac

# Top-level `key: value` of Chart.yaml, quotes stripped.
chart_field() {
  awk -v k="$1" '$1 == k":" { v = $2; gsub(/["'\'']/, "", v); print v; exit }' "$chart"
}
for field in version appVersion; do
  have=$(chart_field "$field")
  if [ "$have" != "$version" ]; then
    echo "release-notes.sh: $chart has $field '$have', the tag says '$version': bump the chart first" >&2
    exit 1
  fi
done

[ -f "$changelog" ] || { echo "release-notes.sh: no $changelog" >&2; exit 1; }
heading=$(awk -v v="$version" '
  /^## / {
    line = $0; gsub(/[][()]/, " ", line); n = split(line, w, /[ \t]+/)
    for (i = 2; i <= n; i++) if (w[i] == v || w[i] == "v" v) { print; exit }
  }
' "$changelog")
[ -n "$heading" ] || { echo "release-notes.sh: $changelog has no section for $version" >&2; exit 1; }
if printf '%s' "$heading" | grep -qi unreleased; then
  echo "release-notes.sh: $changelog still calls $version unreleased ($heading): give it the release date" >&2
  exit 1
fi
notes=$(awk -v h="$heading" '
  /^## / { if (found) exit; if ($0 == h) { found = 1; next } }
  found && (started || NF) { started = 1; print }
' "$changelog")
if [ -z "$(printf '%s' "$notes" | tr -d '[:space:]')" ]; then
  echo "release-notes.sh: $changelog has an empty section for $version" >&2
  exit 1
fi
printf '%s\n' "$notes"
