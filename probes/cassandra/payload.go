package cassandra

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// payloadPool is random data that every value the canary writes is a window
// of, chosen by the row's key: a value can be regenerated for comparison
// without keeping it in memory, and writing it copies nothing.
type payloadPool []byte

// poolSlack is how many distinct windows a pool offers per length.
const poolSlack = 1 << 16

func newBinaryPool(maxLen int) payloadPool {
	p := make([]byte, maxLen+poolSlack)
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := 0; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], r.Uint64())
	}
	return p
}

// newTextPool holds printable ASCII only: YCSB fields are varchar.
func newTextPool(maxLen int) payloadPool {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	p := make([]byte, maxLen+poolSlack)
	for i := range p {
		p[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return p
}

// window returns the n bytes a seed selects.
func (p payloadPool) window(seed uint64, n int) []byte {
	off := int(mix(seed) % uint64(len(p)-n+1))
	return p[off : off+n]
}

// mix is SplitMix64's finaliser: neighbouring seeds land far apart.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// compare reports how a value read back differs from what was written.
func compare(what string, got, want []byte) error {
	if bytes.Equal(got, want) {
		return nil
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s is %d bytes, %d were written", what, len(got), len(want))
	}
	off := 0
	for off < len(got) && got[off] == want[off] {
		off++
	}
	return fmt.Errorf("%s differs from what was written at byte %d of %d", what, off, len(want))
}
