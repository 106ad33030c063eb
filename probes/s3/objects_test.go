package s3

import (
	"strings"
	"testing"
	"time"
)

func TestLiveSetBoundsAndOwnership(t *testing.T) {
	l := newLiveSet("dbcanary/t/i/0123456789abcdef/", 2)
	now := time.Now()
	if o := l.forRead(KiB, now); o != nil {
		t.Fatal("read from an empty set")
	}
	write := func() *object {
		o, _, ok := l.forWrite(KiB)
		if !ok {
			t.Fatal("no slot")
		}
		l.written(KiB, o, 1, "etag", time.Now(), false)
		return o
	}
	a := write()
	if !strings.HasPrefix(a.key, "dbcanary/t/i/0123456789abcdef/1KiB/0000000") {
		t.Fatalf("key %s outside the prefix", a.key)
	}
	if o := l.forDelete(KiB, time.Now()); o != nil {
		t.Fatal("deleted the only readable object")
	}
	b := write()
	// At the cap, a put overwrites the oldest instead of adding a key.
	o, overwrite, ok := l.forWrite(KiB)
	if !ok || !overwrite || o != a {
		t.Fatalf("at cap: got %v overwrite=%v, want the oldest", o, overwrite)
	}
	l.written(KiB, o, 2, "etag2", time.Now(), false)
	if l.count(KiB) != 2 {
		t.Fatalf("count %d, want 2", l.count(KiB))
	}
	// Oldest is now b; delete takes it and keeps a.
	if d := l.forDelete(KiB, time.Now()); d != b {
		t.Fatalf("delete picked %v, want the oldest", d)
	}
	// A busy object (b, being deleted) is not read; reads share a, which no
	// put or delete takes while it is read; a suspect one is deleted first.
	r := l.forRead(KiB, time.Now())
	if r != a {
		t.Fatalf("read %v, want a", r)
	}
	if again := l.forRead(KiB, time.Now()); again != a {
		t.Fatalf("second read got %v, want a shared with the first", again)
	}
	if o, _, ok := l.forWrite(KiB); ok && o == a {
		t.Fatal("a put overwrites an object being read")
	}
	l.release(r, false)
	if d := l.forDelete(KiB, time.Now()); d == a {
		t.Fatal("a delete takes an object still read once")
	}
	l.release(r, true)
	if again := l.forRead(KiB, time.Now()); again != nil {
		t.Fatal("read a suspect object")
	}
	l.remove(KiB, b)
	if d := l.forDelete(KiB, time.Now()); d != a {
		t.Fatal("a suspect object that is the last one should still be deletable")
	}
}

func TestLiveSetExpectedSkipsChanging(t *testing.T) {
	l := newLiveSet("p/", 4)
	o, _, _ := l.forWrite(MiB)
	l.written(MiB, o, 1, "", time.Now(), false)
	exp := l.expected(time.Now())
	if len(exp) != 1 || !l.unchanged(exp[0]) {
		t.Fatalf("expected %v", exp)
	}
	w, _, _ := l.forWrite(MiB) // a new key: in flight, not expected
	if len(l.expected(time.Now())) != 1 {
		t.Fatal("an in-flight write is expected in a listing")
	}
	l.written(MiB, w, 2, "", time.Now(), false)
	d := l.forDelete(MiB, time.Now())
	if d != o || l.unchanged(exp[0]) {
		t.Fatal("an object being deleted counts as unchanged")
	}
	old := l.expected(time.Now().Add(maxAge + time.Minute))
	if len(old) != 0 {
		t.Fatal("objects older than maxAge are expected in a listing")
	}
}

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		rel   string
		kind  keyKind
		group string
	}{
		{"pod-a/0123456789abcdef/.heartbeat", keyHeartbeat, "pod-a/0123456789abcdef/"},
		{"pod-a/0123456789abcdef/4KiB/00000001", keyObject, "pod-a/0123456789abcdef/"},
		{"pod-a/0123456789abcdef/512B/000000012345", keyObject, "pod-a/0123456789abcdef/"},
		{"it-1-once-abc123/0123456789abcdef/8MiB/00000009", keyObject, "it-1-once-abc123/0123456789abcdef/"},
		{"pod-a/4KiB/0123abcd-00000001", keyOldObject, "pod-a/4KiB/"},
		// Anything else is never touched.
		{"pod-a/0123456789abcdef/4KiB/x", keyForeign, ""},
		{"pod-a/0123456789abcdef/4kib/00000001", keyForeign, ""},
		{"pod-a/0123456789abcdef/4096B/00000001", keyForeign, ""}, // not the canonical 4KiB
		{"pod-a/0123456789ABCDEF/4KiB/00000001", keyForeign, ""},
		{"pod-a/0123456789abcde/.heartbeat", keyForeign, ""},
		{"pod-a/0123456789abcdef/heartbeat", keyForeign, ""},
		{"pod-a/0123456789abcdef/4KiB/00000001/x", keyForeign, ""},
		{"Pod-A/0123456789abcdef/4KiB/00000001", keyForeign, ""},
		{"/0123456789abcdef/4KiB/00000001", keyForeign, ""},
		{"pod-a/4KiB/0123abcd-0001", keyForeign, ""},
		{"pod-a/notes.txt", keyForeign, ""},
		{"README", keyForeign, ""},
		{"", keyForeign, ""},
	} {
		kind, group := parseKey(tc.rel)
		if kind != tc.kind || group != tc.group {
			t.Errorf("parseKey(%q) = %d %q; want %d %q", tc.rel, kind, group, tc.kind, tc.group)
		}
	}
	// The heartbeat is listed before the objects of its run.
	if !(heartbeatName < "0") {
		t.Errorf("%q does not sort before the size folders", heartbeatName)
	}
}

// count is the number of objects tracked for a size.
func (l *liveSet) count(s Size) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.bySize[s])
}

// TestLiveSetRecycle: in recycle mode reads go round the set in order,
// skipping the objects a put holds.
func TestLiveSetRecycle(t *testing.T) {
	l := newLiveSet("p/", 3)
	l.recycle = true
	var objs []*object
	for i := range 3 {
		o, _, _ := l.forWrite(KiB)
		l.written(KiB, o, uint64(i), "", time.Now(), false)
		objs = append(objs, o)
	}
	var got []*object
	for range 4 {
		o := l.forRead(KiB, time.Now())
		got = append(got, o)
		l.release(o, false)
	}
	if got[0] != objs[0] || got[1] != objs[1] || got[2] != objs[2] || got[3] != objs[0] {
		t.Fatalf("recycle order %v, want %v then the first again", got, objs)
	}
	objs[1].busy = true
	if a, b := l.forRead(KiB, time.Now()), l.forRead(KiB, time.Now()); a != objs[2] || b != objs[0] {
		t.Fatalf("recycle read %v, %v; want the busy one skipped", a, b)
	}
}

func TestLiveSetFreshKeys(t *testing.T) {
	l := newLiveSet("dbcanary/t/i/0123456789abcdef/", 2)
	l.fresh = true
	put := func(s Size) (*object, bool) {
		o, overwrite, ok := l.forWrite(s)
		if !ok {
			t.Fatal("no slot")
		}
		l.written(s, o, 1, "etag", time.Now(), false)
		return o, overwrite
	}
	a, _ := put(KiB)
	put(KiB)
	// At the cap a put writes a new key; the oldest is forgotten, not overwritten.
	c, overwrite := put(KiB)
	if overwrite || c == a || c.key == a.key {
		t.Fatalf("fresh mode overwrote %s (overwrite=%v)", a.key, overwrite)
	}
	if l.count(KiB) != 2 {
		t.Fatalf("tracked %d objects, want 2 (the forgotten one is Close's)", l.count(KiB))
	}
	for _, k := range l.keys() {
		if k == a.key {
			t.Fatal("the forgotten object is still tracked")
		}
	}
	if got := l.closeAllowance(); got != time.Second {
		t.Errorf("close allowance %v for 1 forgotten object, want 1s", got)
	}
	// Past the budget of a size, puts overwrite again.
	big := Size(maxFreshBytes) // a budget of one
	put(big)
	put(big)
	put(big) // the one fresh key
	if _, overwrite := put(big); !overwrite {
		t.Error("a put past the fresh budget did not overwrite")
	}
	// Without fresh mode nothing is forgotten and Close adds no time.
	if got := newLiveSet("p/", 2).closeAllowance(); got != 0 {
		t.Errorf("close allowance %v without fresh mode, want 0", got)
	}
}
