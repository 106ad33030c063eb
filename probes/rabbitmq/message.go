package rabbitmq

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// A canary message body is one header line followed by a payload generated
// from (run, seq), so the consumer can regenerate what was published and
// compare byte for byte without keeping every body in memory:
//
//	dbcanary/1 <instance> <run> <seq> <intended unix ns> <sent unix ns> <body size>\n<payload>
//
// The size field makes a truncated or padded body a mismatch too.
const magic = "dbcanary/1"

type header struct {
	instance string
	run      uint64
	seq      uint64
	intended int64
	sent     int64
	size     int
}

// encode builds the body of size bytes (or the header alone if larger).
func encode(h header, size int) []byte {
	b := make([]byte, 0, max(size, 96))
	b = append(b, magic...)
	b = append(b, ' ')
	b = append(b, h.instance...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, h.run, 16)
	b = append(b, ' ')
	b = strconv.AppendUint(b, h.seq, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.intended, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, h.sent, 10)
	b = append(b, ' ')
	// The size field's own width depends on the size: settle it in two passes.
	total := len(b) + len(strconv.Itoa(size)) + 1
	if total < size {
		total = size
	}
	if w := len(strconv.Itoa(total)); len(b)+w+1 > total {
		total = len(b) + w + 1
	}
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, '\n')
	if n := total - len(b); n > 0 {
		b = appendPayload(b, h.run, h.seq, n)
	}
	return b
}

// appendPayload appends n deterministic pseudo-random bytes for (run, seq).
func appendPayload(b []byte, run, seq uint64, n int) []byte {
	r := rand.New(rand.NewPCG(run, seq))
	var w [8]byte
	for n > 0 {
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		k := min(n, 8)
		b = append(b, w[:k]...)
		n -= k
	}
	return b
}

var errNotCanary = errors.New("not a dbcanary message")

// decode parses a body's header.
func decode(body []byte) (header, error) {
	line, _, ok := bytes.Cut(body, []byte{'\n'})
	if !ok || len(line) > 256 {
		return header{}, errNotCanary
	}
	f := bytes.Fields(line)
	if len(f) != 7 || string(f[0]) != magic {
		return header{}, errNotCanary
	}
	var h header
	var err error
	h.instance = string(f[1])
	if h.run, err = strconv.ParseUint(string(f[2]), 16, 64); err != nil {
		return header{}, errNotCanary
	}
	if h.seq, err = strconv.ParseUint(string(f[3]), 10, 64); err != nil {
		return header{}, errNotCanary
	}
	if h.intended, err = strconv.ParseInt(string(f[4]), 10, 64); err != nil {
		return header{}, errNotCanary
	}
	if h.sent, err = strconv.ParseInt(string(f[5]), 10, 64); err != nil {
		return header{}, errNotCanary
	}
	if h.size, err = strconv.Atoi(string(f[6])); err != nil {
		return header{}, errNotCanary
	}
	return h, nil
}

// verify regenerates the body a header promises and compares it byte for byte.
func verify(h header, body []byte) error {
	if len(body) != h.size {
		return fmt.Errorf("message seq %d: body is %d bytes, %d were published", h.seq, len(body), h.size)
	}
	headerLen := bytes.IndexByte(body, '\n') + 1
	want := appendPayload(nil, h.run, h.seq, len(body)-headerLen)
	got := body[headerLen:]
	if !bytes.Equal(got, want) {
		off := 0
		for off < len(got) && got[off] == want[off] {
			off++
		}
		return fmt.Errorf("message seq %d: body differs from what was published at byte %d of %d", h.seq, headerLen+off, len(body))
	}
	return nil
}
