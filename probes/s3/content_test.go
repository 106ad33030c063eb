package s3

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func TestContentIsDeterministicAndSeekable(t *testing.T) {
	const size = 100003
	a, err := io.ReadAll(newContent(42, size))
	if err != nil || len(a) != size {
		t.Fatalf("read %d bytes, %v", len(a), err)
	}
	b := make([]byte, 777)
	if n, err := newContent(42, size).ReadAt(b, 12345); n != len(b) || err != nil || !bytes.Equal(b, a[12345:12345+777]) {
		t.Fatalf("ReadAt differs from the stream (n=%d err=%v)", n, err)
	}
	c := newContent(42, size)
	if _, err := c.Seek(-5, io.SeekEnd); err != nil {
		t.Fatal(err)
	}
	tail, _ := io.ReadAll(c)
	if !bytes.Equal(tail, a[size-5:]) {
		t.Fatalf("tail after Seek differs")
	}
	other, _ := io.ReadAll(newContent(43, size))
	if bytes.Equal(a[:64], other[:64]) {
		t.Fatalf("another seed gives the same bytes")
	}
}

func TestVerifier(t *testing.T) {
	const size = 3*verifyBuf + 17
	body, _ := io.ReadAll(newContent(7, size))
	check := func(body []byte, chunk int) error {
		v := verifier{seed: 7, size: size, expected: make([]byte, verifyBuf)}
		for len(body) > 0 {
			n := min(chunk, len(body))
			if err := v.check(body[:n]); err != nil {
				return err
			}
			body = body[n:]
		}
		return v.done()
	}
	for _, chunk := range []int{1 << 20, 1000, verifyBuf} {
		if err := check(body, chunk); err != nil {
			t.Fatalf("intact body, chunk %d: %v", chunk, err)
		}
	}
	bad := bytes.Clone(body)
	bad[verifyBuf+5] ^= 1
	if err := check(bad, 4096); !errors.Is(err, errMismatch) || err.Error() != "content differs from what was written: first difference at byte 65541 of 196625" {
		t.Fatalf("flipped byte: %v", err)
	}
	if err := check(body[:size-1], 4096); !errors.Is(err, errMismatch) {
		t.Fatalf("short body: %v", err)
	}
	if err := check(append(bytes.Clone(body), 0), 4096); !errors.Is(err, errMismatch) {
		t.Fatalf("long body: %v", err)
	}
}

// fill's whole-word loop gives the bytes of word(seed, i), byte by byte,
// at any offset and length; BenchmarkFill is its speed.
func TestFillMatchesWords(t *testing.T) {
	ref := func(seed uint64, off int64, n int) []byte {
		out := make([]byte, n)
		var w [8]byte
		for i := range out {
			at := off + int64(i)
			binary.LittleEndian.PutUint64(w[:], word(seed, uint64(at)/8))
			out[i] = w[at%8]
		}
		return out
	}
	for _, off := range []int64{0, 1, 7, 8, 9, 1<<20 + 3} {
		for _, n := range []int{0, 1, 5, 8, 13, 64, 1001} {
			got := make([]byte, n)
			fill(99, off, got)
			if want := ref(99, off, n); !bytes.Equal(got, want) {
				t.Fatalf("fill at %d, %d bytes: %x, want %x", off, n, got, want)
			}
		}
	}
}

func BenchmarkFill(b *testing.B) {
	p := make([]byte, verifyBuf)
	b.SetBytes(verifyBuf)
	for i := range b.N {
		fill(1, int64(i)*verifyBuf, p)
	}
}
