package cassandra

// Namespace names the canary's keyspace and table for the status page.
func (p *Probe) Namespace() string { return "keyspace " + p.cfg.Keyspace + ", table " + p.table }
