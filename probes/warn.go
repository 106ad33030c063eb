package probes

// Warner is implemented by a Config whose valid settings still deserve a
// warning (they make the canary check less than an operator may expect):
// `dbcanary check-config` prints them, and the probe logs them when built.
type Warner interface {
	Warnings() []string
}
