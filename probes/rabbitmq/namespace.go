package rabbitmq

// Namespace names the canary's queue for the status page.
func (p *Probe) Namespace() string { return "queue " + p.queue }
