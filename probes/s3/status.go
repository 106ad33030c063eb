package s3

// Namespace names the canary's bucket and this process's key prefix for the status page.
func (p *Probe) Namespace() string { return "s3://" + p.cfg.Bucket + "/" + p.prefix }
