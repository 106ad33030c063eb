package s3

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// maxAge is how old an object may be and still be read: the lifecycle rule
// expires the prefix after a day, so an older object may be gone for a
// reason that is not a fault.
const maxAge = 12 * time.Hour

// object is a canary object this instance wrote and has not deleted.
type object struct {
	key      string
	seed     uint64
	size     int64
	etag     string
	written  time.Time // zero while the first write is in flight
	busy     bool      // a put or delete uses it: no other op may read, overwrite or delete it
	readers  int       // gets and heads reading it: it may not be overwritten or deleted meanwhile
	changing bool      // a put or delete is in flight on it: a listing may or may not show it
	suspect  bool      // it read back wrong: never read again, overwritten or deleted first
}

// readable reports whether get, head and list may expect this object intact.
func (o *object) readable(now time.Time) bool {
	return !o.busy && !o.suspect && !o.written.IsZero() && now.Sub(o.written) < maxAge
}

// liveSet tracks the canary objects of each size, oldest write first, so get,
// head and delete only touch objects this instance wrote, and the number of
// objects left in the bucket stays bounded by max per size.
type liveSet struct {
	mu     sync.Mutex
	prefix string // <prefix><instance>/<run>/: this process's own keys
	max    int
	seq    uint64
	bySize map[Size][]*object
	// recycle makes forRead go round the objects in order (Mongoose's
	// recycle mode: a prepared set read again and again), from cursor.
	recycle bool
	cursor  map[Size]int
	// fresh makes a put past max write a new key instead of overwriting the
	// oldest object (bench profile s3-sizes: s3-benchmark's and warp's PUTs
	// create objects, and an overwrite costs a store more). The replaced
	// object is forgotten and stays in the bucket until Close deletes the
	// run's prefix; freshUsed bounds how many per size (freshBudget).
	fresh     bool
	freshUsed map[Size]int
	forgotten int // objects left for Close this way
}

// The bound of fresh keys per size: what Close can delete in its time.
const (
	maxFreshObjects = 100_000
	maxFreshBytes   = 1 << 30
)

func freshBudget(s Size) int { return int(min(maxFreshObjects, max(1, maxFreshBytes/int64(s)))) }

func newLiveSet(prefix string, max int) *liveSet {
	return &liveSet{prefix: prefix, max: max, bySize: map[Size][]*object{}}
}

// newKey is <prefix><instance>/<run>/<size>/<sequence>: the layout gc.go parses.
func (l *liveSet) newKey(s Size) string {
	l.seq++
	return fmt.Sprintf("%s%s/%08d", l.prefix, s, l.seq)
}

// forRead picks a random readable object of the size (in recycle mode the
// next one in order) and counts a reader on it; nil when none. Several reads
// may share an object; a put or delete waits until the last has released it.
func (l *liveSet) forRead(s Size, now time.Time) *object {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recycle {
		return l.nextInOrder(s, now)
	}
	var n int
	for _, o := range l.bySize[s] {
		if o.readable(now) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	pick := rand.IntN(n)
	for _, o := range l.bySize[s] {
		if o.readable(now) {
			if pick == 0 {
				o.readers++
				return o
			}
			pick--
		}
	}
	return nil
}

// nextInOrder is forRead in recycle mode: the readable object after the
// last one read, round the set; l.mu is held.
func (l *liveSet) nextInOrder(s Size, now time.Time) *object {
	objs := l.bySize[s]
	if l.cursor == nil {
		l.cursor = map[Size]int{}
	}
	for range objs {
		i := l.cursor[s] % len(objs)
		l.cursor[s] = i + 1
		if o := objs[i]; o.readable(now) {
			o.readers++
			return o
		}
	}
	return nil
}

// forWrite returns the object a put writes, marked busy: a new key while the
// size has fewer than max objects, else the oldest idle one (suspect first),
// which is overwritten; in fresh mode that one is forgotten instead and the
// put gets a new key. ok is false when every object is busy.
func (l *liveSet) forWrite(s Size) (o *object, overwrite, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	objs := l.bySize[s]
	if len(objs) >= l.max {
		o := oldestIdle(objs)
		switch {
		case o != nil && l.fresh && l.freshUsed[s] < freshBudget(s):
			if l.freshUsed == nil {
				l.freshUsed = map[Size]int{}
			}
			l.freshUsed[s]++
			l.forgotten++
			objs = slices.DeleteFunc(objs, func(x *object) bool { return x == o })
		case o != nil:
			o.busy, o.changing = true, true
			return o, true, true
		case len(objs) >= 2*l.max:
			return nil, false, false
		}
	}
	o = &object{key: l.newKey(s), size: int64(s), busy: true, changing: true}
	l.bySize[s] = append(objs, o)
	return o, false, true
}

// forDelete returns the oldest idle object (suspect first), marked busy, as
// long as another readable object of the size remains for get and head.
func (l *liveSet) forDelete(s Size, now time.Time) *object {
	l.mu.Lock()
	defer l.mu.Unlock()
	objs := l.bySize[s]
	o := oldestIdle(objs)
	if o == nil {
		return nil
	}
	for _, other := range objs {
		if other != o && !other.suspect && !other.written.IsZero() && now.Sub(other.written) < maxAge {
			o.busy, o.changing = true, true
			return o
		}
	}
	if o.suspect || o.written.IsZero() || now.Sub(o.written) >= maxAge {
		o.busy, o.changing = true, true // not readable anyway: deleting it costs get and head nothing
		return o
	}
	return nil
}

// scratch registers a fresh object for a delete that had none to spare.
func (l *liveSet) scratch(s Size) *object {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := &object{key: l.newKey(s), size: int64(s), busy: true, changing: true}
	l.bySize[s] = append(l.bySize[s], o)
	return o
}

func oldestIdle(objs []*object) *object {
	var oldest *object
	for _, o := range objs {
		if o.busy || o.readers > 0 {
			continue
		}
		if o.suspect {
			return o
		}
		if oldest == nil || o.written.Before(oldest.written) {
			oldest = o
		}
	}
	return oldest
}

// written records a completed write and releases the object unless keep
// (the caller reads or deletes it next); the newest write goes last.
func (l *liveSet) written(s Size, o *object, seed uint64, etag string, at time.Time, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o.seed, o.etag, o.written, o.busy, o.changing, o.suspect = seed, etag, at, keep, false, false
	objs := l.bySize[s]
	if i := slices.Index(objs, o); i >= 0 {
		objs = append(slices.Delete(objs, i, i+1), o)
		l.bySize[s] = objs
	}
}

// release frees an object after a read (or after the write that made it
// for a read, which left it busy); suspect marks it as read back wrong.
func (l *liveSet) release(o *object, suspect bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o.readers > 0 {
		o.readers--
	} else {
		o.busy = false
	}
	if suspect {
		o.suspect = true
	}
}

// remove forgets an object: deleted, or found gone.
func (l *liveSet) remove(s Size, o *object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.bySize[s] = slices.DeleteFunc(l.bySize[s], func(x *object) bool { return x == o })
}

// reset forgets everything (the bucket was recreated).
func (l *liveSet) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.bySize)
}

// listed is an object expected in a listing: its write completed before the list began.
type listed struct {
	obj     *object
	written time.Time
}

// expected returns the readable objects a listing must show.
func (l *liveSet) expected(now time.Time) []listed {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []listed
	for _, objs := range l.bySize {
		for _, o := range objs {
			if o.readable(now) {
				out = append(out, listed{o, o.written})
			}
		}
	}
	return out
}

// unchanged reports whether an object is still live and not rewritten since e was taken.
func (l *liveSet) unchanged(e listed) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.bySize[Size(e.obj.size)], e.obj) && e.obj.written.Equal(e.written) && !e.obj.changing
}

// closeAllowance is the time Close adds to delete the objects fresh mode
// forgot: a second for each 1000 (one multi-object DELETE each).
func (l *liveSet) closeAllowance() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration((l.forgotten+999)/1000) * time.Second
}

// keys returns the keys of every object tracked, busy and suspect ones too.
func (l *liveSet) keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, objs := range l.bySize {
		for _, o := range objs {
			out = append(out, o.key)
		}
	}
	return out
}
