package main

import (
	"runtime/debug"
	"strings"

	"github.com/prometheus/common/version"
)

// A binary built by `make build`, goreleaser or the Dockerfile gets its version
// by -ldflags; a plain `go build` or `go install module@vX.Y.Z` does not, so
// fill in what the Go toolchain recorded instead of exporting empty labels.
func init() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fillVersion(bi)
}

// fillVersion sets the version fields that ldflags left empty from bi.
func fillVersion(bi *debug.BuildInfo) {
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if version.Version == "" {
		v := strings.TrimPrefix(bi.Main.Version, "v")
		if v == "" || v == "(devel)" {
			v = "devel"
			if settings["vcs.modified"] == "true" {
				v += "-dirty"
			}
		}
		version.Version = v
	}
	if version.Revision == "" {
		version.Revision = settings["vcs.revision"]
	}
	if version.Revision == "" {
		version.Revision = "unknown"
	}
	if version.BuildDate == "" {
		version.BuildDate = settings["vcs.time"]
	}
	if version.Branch == "" {
		version.Branch = "unknown"
	}
	if version.BuildUser == "" {
		version.BuildUser = "go"
	}
}
