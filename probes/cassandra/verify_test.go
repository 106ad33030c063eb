package cassandra

import (
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestCompare(t *testing.T) {
	want := []byte("abcdef")
	if err := compare("a", []byte("abcdef"), want); err != nil {
		t.Errorf("equal: %v", err)
	}
	if err := compare("blob a", []byte("abcXef"), want); err == nil || err.Error() != "blob a differs from what was written at byte 3 of 6" {
		t.Errorf("changed byte: %v", err)
	}
	if err := compare("blob b", []byte("abc"), want); err == nil || err.Error() != "blob b is 3 bytes, 6 were written" {
		t.Errorf("truncated: %v", err)
	}
}

func TestPayloadIsStablePerKey(t *testing.T) {
	p := newBinaryPool(1000)
	k1, k2 := gocql.MustRandomUUID(), gocql.MustRandomUUID()
	a1 := p.window(uint64FromKey(k1[:8]), 1000)
	if string(a1) != string(p.window(uint64FromKey(k1[:8]), 1000)) {
		t.Fatal("the same key gave two payloads")
	}
	if string(a1) == string(p.window(uint64FromKey(k2[:8]), 1000)) {
		t.Fatal("two keys gave the same payload")
	}
	text := newTextPool(100)
	for _, c := range text.window(42, 100) {
		if c < '0' || c > 'z' {
			t.Fatalf("text pool byte %q is not alphanumeric", c)
		}
	}
}

func TestKeyRing(t *testing.T) {
	r := newKeyRing(3)
	now := time.Now()
	if _, ok := r.pick(now, time.Second, time.Hour); ok {
		t.Fatal("empty ring picked a key")
	}
	old := written{key: gocql.MustRandomUUID(), at: now.Add(-2 * time.Hour)}
	r.add(old)
	if _, ok := r.pick(now, time.Second, time.Hour); ok {
		t.Fatal("picked a key past the read age bound")
	}
	young := written{key: gocql.MustRandomUUID(), at: now.Add(-time.Millisecond)}
	r.add(young)
	if w, ok := r.pick(now, time.Second, time.Hour); !ok || w.key != young.key {
		t.Fatalf("with only a young key, got %v %v, want the young key", w.key, ok)
	}
	ready := written{key: gocql.MustRandomUUID(), at: now.Add(-time.Minute)}
	r.add(ready)
	for range 20 {
		if w, _ := r.pick(now, time.Second, time.Hour); w.key != ready.key {
			t.Fatalf("picked %v, want the only key of the right age", w.key)
		}
	}
	for range 5 {
		r.add(written{key: gocql.MustRandomUUID(), at: now})
	}
	if r.n != 3 {
		t.Errorf("ring holds %d keys, bound is 3", r.n)
	}
}

func TestRecords(t *testing.T) {
	r := &records{recs: make([]record, 2)}
	if _, _, ok := r.claim(true, 0, time.Hour); ok {
		t.Fatal("claimed an unknown record for reading")
	}
	n, rec, ok := r.claim(false, 0, 0)
	if !ok {
		t.Fatal("no free record to update")
	}
	now := time.Now().UnixNano()
	for f := range rec.at {
		rec.at[f] = now
	}
	r.store(n, rec)
	if _, _, ok := r.claim(true, 0, time.Hour); ok {
		t.Fatal("claimed a busy record")
	}
	r.release(n)
	got, _, ok := r.claim(true, 0, time.Hour)
	if !ok || got != n {
		t.Fatalf("claim for read = %d %v, want %d", got, ok, n)
	}
	r.release(got)
	r.reset()
	if _, _, ok := r.claim(true, 0, time.Hour); ok {
		t.Fatal("reset kept a record")
	}
}

func TestCauseOfDriverText(t *testing.T) {
	cases := map[string]string{
		"gocql: unable to create session: unable to discover protocol version: Provided username x and/or password are incorrect": "auth",
		"gocql: unable to create session: unable to discover protocol version: dial tcp 127.0.0.1:1: connect: connection refused": "refused",
		"gocql: unable to create session: x509: certificate signed by unknown authority":                                          "tls",
		"no connections were made when creating the session":                                                                      "refused",
	}
	for msg, want := range cases {
		if got := causeOf(errString(msg)); string(got) != want {
			t.Errorf("%q: cause %s, want %s", msg, got, want)
		}
	}
	if got := causeOf(gocql.ErrNoConnections); got != "refused" {
		t.Errorf("ErrNoConnections: %s", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
