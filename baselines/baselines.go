// Package baselines holds the shipped baseline file, compiled into the
// binary: the daemon's classic histogram bounds include its alert thresholds
// (internal/metrics), so the shipped rules read exact buckets.
package baselines

import _ "embed" // the shipped baseline file

// Reference is baselines/james-reference.yaml, the file `make generate`
// builds the shipped rules and boards from.
//
//go:embed james-reference.yaml
var Reference []byte
