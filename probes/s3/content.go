package s3

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// content is an object body computed from a seed: byte i depends only on
// (seed, i), so any range can be produced again to compare a download byte
// for byte without keeping the body in memory. It is a reader, ReaderAt and
// Seeker so minio-go can re-read it for signing and upload parts in parallel.
type content struct {
	seed uint64
	size int64
	off  int64
}

func newContent(seed uint64, size int64) *content { return &content{seed: seed, size: size} }

// golden is splitmix64's increment: word i mixes seed + (i+1)*golden.
const golden = 0x9e3779b97f4a7c15

// word is splitmix64 of (seed, index): cheap, and a different seed changes every word.
func word(seed, i uint64) uint64 { return mix(seed + (i+1)*golden) }

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fill writes the content bytes at [off, off+len(p)) into p: whole words
// straight into p (the state advances by one addition per word), the
// partial words at either end through a scratch word. Streaming 100 MiB
// objects spends its CPU here, on every PUT and every compared GET.
func fill(seed uint64, off int64, p []byte) {
	var w [8]byte
	if r := off % 8; r != 0 {
		binary.LittleEndian.PutUint64(w[:], word(seed, uint64(off)/8))
		n := copy(p, w[r:])
		p, off = p[n:], off+int64(n)
	}
	z := seed + (uint64(off)/8+1)*golden
	for len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, mix(z))
		p, z = p[8:], z+golden
	}
	if len(p) > 0 {
		binary.LittleEndian.PutUint64(w[:], mix(z))
		copy(p, w[:])
	}
}

func (c *content) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	if off >= c.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := c.size - off; int64(n) > rest {
		n = int(rest)
	}
	fill(c.seed, off, p[:n])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (c *content) Read(p []byte) (int, error) {
	n, err := c.ReadAt(p, c.off)
	c.off += int64(n)
	return n, err
}

func (c *content) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += c.off
	case io.SeekEnd:
		offset += c.size
	default:
		return 0, errors.New("bad whence")
	}
	if offset < 0 {
		return 0, errors.New("negative position")
	}
	c.off = offset
	return offset, nil
}

// Size lets minio-go learn the length without seeking.
func (c *content) Size() int64 { return c.size }

// verifyBuf is the chunk size of a streaming compare: two of them per get.
const verifyBuf = 64 << 10

// errMismatch marks a body that differs from what was written.
var errMismatch = errors.New("content differs from what was written")

// verifier compares a body, as it is read, with the content of (seed, size).
type verifier struct {
	seed     uint64
	size     int64
	got      int64
	expected []byte
}

// check compares the next chunk of the body.
func (v *verifier) check(p []byte) error {
	if v.got+int64(len(p)) > v.size {
		return fmt.Errorf("%w: body is longer than the %d bytes written", errMismatch, v.size)
	}
	for len(p) > 0 {
		n := min(len(p), len(v.expected))
		fill(v.seed, v.got, v.expected[:n])
		if !bytes.Equal(p[:n], v.expected[:n]) {
			i := 0
			for p[i] == v.expected[i] {
				i++
			}
			return fmt.Errorf("%w: first difference at byte %d of %d", errMismatch, v.got+int64(i), v.size)
		}
		p, v.got = p[n:], v.got+int64(n)
	}
	return nil
}

// done reports a body shorter than written.
func (v *verifier) done() error {
	if v.got != v.size {
		return fmt.Errorf("%w: body has %d bytes, %d were written", errMismatch, v.got, v.size)
	}
	return nil
}
