package probes

import (
	"fmt"
	"io"
	"os"
)

// File size bounds: a secret or certificate file is small, and a path that
// points at /dev/zero or a FIFO must not make the canary read forever.
const (
	maxSecretBytes = 64 << 10
	maxPEMBytes    = 4 << 20
)

// readBounded reads a whole file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d KiB: not a secret or certificate file", path, max>>10)
	}
	return b, nil
}
