package noop

// Namespace implements engine.Namespacer: the noop probe stores nothing.
func (p *Probe) Namespace() string { return "none (stores nothing)" }
