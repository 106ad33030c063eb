package generate

// KnownOp reports whether the generator can alert on a backend's op (and
// phase, when not empty): a figure for any other op can only be a reference.
func KnownOp(backend, op, phase string) bool {
	be, ok := backendByName(backend)
	return ok && be.hasOp(op, phase)
}
