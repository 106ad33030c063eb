package opensearch

// Namespace names the canary's indices (one per day) for the status page.
func (p *Probe) Namespace() string { return "indices " + p.prefix + "*" }
