// Package codecheck holds tests on the source tree itself (function length), not on any
// package's behaviour; it has no code of its own.
package codecheck
