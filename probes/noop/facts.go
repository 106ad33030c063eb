package noop

import "github.com/dbcanary/dbcanary/probes"

// noop measures the engine's own overhead: no rules, no board.
func init() { probes.Describe("noop", probes.Facts{NoBoard: true}) }
