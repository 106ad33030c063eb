package probes

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Size is a byte count written as 4KiB, 1MiB, 1GiB, 512B or a plain number:
// object and payload sizes in a config and on the command line.
type Size int64

// Binary units.
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
)

// String is the exact, shortest binary form: it becomes part of op names.
func (s Size) String() string {
	switch {
	case s >= GiB && s%GiB == 0:
		return strconv.FormatInt(int64(s/GiB), 10) + "GiB"
	case s >= MiB && s%MiB == 0:
		return strconv.FormatInt(int64(s/MiB), 10) + "MiB"
	case s >= KiB && s%KiB == 0:
		return strconv.FormatInt(int64(s/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// ParseSize reads 4KiB, 1MiB, 1GiB, 512B or a plain byte count.
func ParseSize(text string) (Size, error) {
	t := strings.TrimSpace(text)
	mult := Size(1)
	for _, u := range []struct {
		suffix string
		mult   Size
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > int64(16*GiB/mult) {
		return 0, fmt.Errorf("%q is not a size: use a whole number with an optional unit B, KiB, MiB or GiB (e.g. 128KiB)", text)
	}
	return Size(n) * mult, nil
}

// UnmarshalYAML accepts "4KiB" and 4096.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return sizeError(n, "a size must be a scalar such as 4KiB")
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return sizeError(n, err.Error())
	}
	*s = v
	return nil
}

// sizeError is a yaml.TypeError, so decoding goes on and reports every
// problem; the column lets internal/config name this node's path exactly.
func sizeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d column %d: %s", n.Line, n.Column, msg)}}
}

// MarshalYAML writes the unit form, for `dbcanary --dumpconfig`.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }
