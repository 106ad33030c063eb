package stack

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// FreePort's ports are outside the kernel's ephemeral range (where ":0"
// and outgoing connections take theirs), distinct, and reserved.
func TestFreePort(t *testing.T) {
	lo, hi := portRange()
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if p < lo || p > hi {
			t.Fatalf("port %d outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		path := filepath.Join(os.TempDir(), "dbcanary-test-ports", strconv.Itoa(p))
		if _, err := os.Stat(path); err != nil {
			t.Errorf("port %d not reserved: %v", p, err)
		}
		// Released only when the test ends: a reservation removed at once
		// lets a later pick draw the same port (1 chance in 24 over 20
		// picks from 4535 ports), which is what this test is here to catch.
		t.Cleanup(func() { _ = os.Remove(path) })
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		t.Logf("ephemeral range %s; FreePort picks in %d-%d", b[:len(b)-1], lo, hi)
	}
}
