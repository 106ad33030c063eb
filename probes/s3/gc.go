package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

// Every process (run) writes only under its own prefix
// <prefix><instance id>/<run>/, where run is random per process, and keeps a
// heartbeat object there, rewritten every heartbeatEvery. Two processes with
// the same instance id (a `once` beside the daemon, two pods of a rolling
// update) therefore never touch each other's keys. The collector of every live
// daemon deletes the objects of runs whose heartbeat is older than
// abandoned_after: those of processes that died without Close (a crash, a
// pod killed, a node lost), so the bucket stays bounded even where the
// lifecycle rule cannot be set and the instance id changes at every rollout.
const (
	heartbeatEvery = time.Minute
	heartbeatName  = ".heartbeat" // sorts before the size folders of its run: see collect
	gcEvery        = 10 * time.Minute
	gcFirstAfter   = time.Minute // plus up to as much again at random, so pods do not all collect at once
	gcMaxListed    = 5000        // keys listed per pass; the next pass resumes after the last
	gcMaxDeleted   = 500         // objects deleted per pass
	gcPassTimeout  = 2 * time.Minute
	closeTimeout   = 10 * time.Second
)

// newRunID is 16 random hex digits: unique per process for all practical purposes.
func newRunID() string { return fmt.Sprintf("%016x", rand.Uint64()) }

// background refreshes the heartbeat and runs the collector until Close.
type background struct {
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
}

// startBackground starts the heartbeat (and, for a daemon, the collector) once.
func (p *Probe) startBackground() {
	p.bg.once.Do(func() {
		p.bg.mu.Lock()
		defer p.bg.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		p.bg.cancel, p.bg.done = cancel, make(chan struct{})
		go p.loop(ctx, p.bg.done)
	})
}

// stopBackground stops the heartbeat and the collector and waits for them; a
// probe stopped this way and not closed looks like a crashed process.
func (p *Probe) stopBackground() {
	p.bg.once.Do(func() {}) // a later startBackground must not start it
	p.bg.mu.Lock()
	cancel, done := p.bg.cancel, p.bg.done
	p.bg.cancel = nil
	p.bg.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (p *Probe) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(p.heartbeatEvery)
	defer tick.Stop()
	nextGC := time.Now().Add(p.gcFirstAfter + rand.N(p.gcFirstAfter+1))
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		bctx, cancel := context.WithTimeout(ctx, p.heartbeatEvery)
		err := p.beat(bctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.logger.Debug("cannot refresh the heartbeat; retrying", "key", p.heartbeat, "err", err)
			continue
		}
		if p.ephemeral || time.Now().Before(nextGC) {
			continue // a one-shot run leaves collecting to the daemons
		}
		nextGC = time.Now().Add(p.gcEvery)
		gctx, cancel := context.WithTimeout(ctx, gcPassTimeout)
		res, err := p.collect(gctx)
		cancel()
		p.logCollect(res, err)
	}
}

// beat writes this run's heartbeat object.
func (p *Probe) beat(ctx context.Context) error {
	body := []byte(fmt.Sprintf("dbcanary heartbeat\ntarget: %s\ninstance: %s\nrun: %s\nstarted: %s\nrefreshed every %s; the objects under this prefix are deleted by other dbcanary instances of the target once this heartbeat is %s old\n",
		p.target, p.instance, p.run, p.started.UTC().Format(time.RFC3339), p.heartbeatEvery, p.abandonedAfter))
	_, err := p.client.PutObject(ctx, p.cfg.Bucket, p.heartbeat, bytes.NewReader(body), int64(len(body)), putOptions("text/plain; charset=utf-8"))
	if err != nil {
		return p.classify("put (heartbeat)", p.heartbeat, err)
	}
	p.wrote.Store(true)
	return nil
}

// serverNow refreshes the heartbeat and returns the server's time of that
// write (its Last-Modified): the collector measures ages with the store's
// clock, so a skewed local clock cannot make live runs look abandoned. The
// Last-Modified header has whole seconds (listings have milliseconds), so
// this "now" is up to 1 s early: ages come out up to 1 s short, on the side
// of keeping objects.
func (p *Probe) serverNow(ctx context.Context) (time.Time, error) {
	if err := p.beat(ctx); err != nil {
		return time.Time{}, err
	}
	info, err := p.client.StatObject(ctx, p.cfg.Bucket, p.heartbeat, minio.StatObjectOptions{})
	if err != nil {
		return time.Time{}, p.classify("head (heartbeat)", p.heartbeat, err)
	}
	return info.LastModified, nil
}

// keyKind is what the collector recognises under the target's prefix.
type keyKind int

const (
	keyForeign   keyKind = iota // not of the canary's layout: never touched
	keyHeartbeat                // <instance>/<run>/.heartbeat
	keyObject                   // <instance>/<run>/<size>/<sequence>
	keyOldObject                // <instance>/<size>/<8 hex>-<sequence>: the layout before heartbeats
	keyLedger                   // <instance>/ledger/<16 hex>: a durability ledger object (ledger.go)
)

// parseKey classifies a key relative to the target's prefix and returns its
// group: the run prefix <instance>/<run>/ (or <instance>/<size>/ for the old
// layout), whose keys are contiguous in a listing.
func parseKey(rel string) (keyKind, string) {
	seg := strings.Split(rel, "/")
	switch {
	case len(seg) == 3 && isInstance(seg[0]) && isRun(seg[1]) && seg[2] == heartbeatName:
		return keyHeartbeat, seg[0] + "/" + seg[1] + "/"
	case len(seg) == 4 && isInstance(seg[0]) && isRun(seg[1]) && isSize(seg[2]) && isDigits(seg[3], 8):
		return keyObject, seg[0] + "/" + seg[1] + "/"
	case len(seg) == 3 && isInstance(seg[0]) && seg[1]+"/" == ledgerDir && isHex(seg[2], 16):
		return keyLedger, seg[0] + "/" + ledgerDir
	case len(seg) == 3 && isInstance(seg[0]) && isSize(seg[1]) && len(seg[2]) > 9 && seg[2][8] == '-' &&
		isHex(seg[2][:8], 8) && isDigits(seg[2][9:], 8):
		return keyOldObject, seg[0] + "/" + seg[1] + "/"
	}
	return keyForeign, ""
}

func isInstance(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s[0] != '.'
}

func isRun(s string) bool { return len(s) == 16 && isHex(s, 16) }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isDigits(s string, min int) bool {
	if len(s) < min || len(s) > 20 {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isSize accepts only the canonical form the canary writes (4KiB, 512B).
func isSize(s string) bool {
	v, err := probes.ParseSize(s)
	return err == nil && v > 0 && v.String() == s
}

// gcState is where the collector resumes and what it knew of the group it
// stopped in (a group's heartbeat is listed before its objects).
type gcState struct {
	mu         sync.Mutex // one pass at a time
	startAfter string
	group      groupState
}

type groupState struct {
	name      string // <instance>/<run>/, "" before the first key
	heartbeat string // the group's heartbeat key, if listed
	fresh     bool   // the heartbeat is younger than abandoned_after: the run is alive
	kept      int    // objects of the group not deleted
}

// gcResult is what one collector pass did.
type gcResult struct {
	Listed, Deleted, Kept int
	Runs                  []string // groups (instance/run) whose heartbeat or last object was deleted
	Done                  bool     // the listing reached the end of the prefix
	Aborted               int      // stale multipart uploads aborted (abortStaleUploads)
}

// collect is one bounded pass of the collector over the target's prefix. It
// deletes a key only if all of these hold:
//   - the key is under the target's prefix and has the canary's own layout;
//   - it is not this run's;
//   - its run has no heartbeat younger than abandoned_after (server time);
//   - the key itself was last written more than abandoned_after ago.
//
// Ledger objects (<instance>/ledger/) have no run and no heartbeat: they are
// deleted once older than abandoned_after, this instance's too. A live
// ledger never holds one that old (its ages are validated below
// abandoned_after less an hour, and it forgets older entries unchecked), so
// only the objects of a ledger whose file was lost, or of an instance id
// gone at a rollout, are removed.
//
// A live process refreshes its heartbeat every minute, so none of its keys is
// ever deleted; the last condition also protects a run whose heartbeat the
// listing did not show yet (just started) and a process of an older version
// without heartbeats (no object older than 12 h is ever read by its writer).
// A run's heartbeat is deleted after its last object.
func (p *Probe) collect(ctx context.Context) (res gcResult, err error) {
	p.gc.mu.Lock()
	defer p.gc.mu.Unlock()
	p.gcPasses.Add(1)
	// A failed pass is retried from where it started, with what was known then.
	savedStart, savedGroup := p.gc.startAfter, p.gc.group
	defer func() {
		if err != nil {
			p.gc.startAfter, p.gc.group = savedStart, savedGroup
		}
	}()
	now, err := p.serverNow(ctx)
	if err != nil {
		return res, fmt.Errorf("refreshing the own heartbeat before collecting: %w", err)
	}
	own := strings.TrimPrefix(p.prefix, p.base)
	g := &p.gc.group
	finish := func() error { return p.finishGroup(ctx, g, &res) }
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	last := p.gc.startAfter
	opts := minio.ListObjectsOptions{Prefix: p.base, Recursive: true, StartAfter: p.gc.startAfter}
	for info := range p.client.ListObjects(lctx, p.cfg.Bucket, opts) {
		if info.Err != nil {
			return res, p.classify("list (collector)", p.base, info.Err)
		}
		if res.Listed >= p.gcMaxListed || res.Deleted >= p.gcMaxDeleted {
			p.gc.startAfter = last // resume here next pass, with the group's state kept
			return res, nil
		}
		res.Listed++
		last = info.Key
		if !strings.HasPrefix(info.Key, p.base) {
			continue // never touch a key outside the prefix, whatever the server lists
		}
		kind, group := parseKey(info.Key[len(p.base):])
		if kind == keyForeign || group == own {
			continue
		}
		if group != g.name {
			if err := finish(); err != nil {
				return res, err
			}
			g.name = group
		}
		old := now.Sub(info.LastModified) >= p.abandonedAfter
		switch kind {
		case keyHeartbeat:
			g.heartbeat, g.fresh = info.Key, !old
		default:
			if g.fresh || !old {
				g.kept++
				res.Kept++
				continue
			}
			if err := p.removeKey(ctx, info.Key); err != nil {
				return res, err
			}
			res.Deleted++
		}
	}
	if err := ctx.Err(); err != nil {
		return res, p.classify("list (collector)", p.base, err)
	}
	if err := finish(); err != nil {
		return res, err
	}
	p.gc.startAfter, res.Done = "", true
	res.Aborted = p.sweepUploads(ctx, now)
	return res, nil
}

// finishGroup ends the collector's walk through group g: a run with no object
// kept and a stale heartbeat loses its heartbeat last.
func (p *Probe) finishGroup(ctx context.Context, g *groupState, res *gcResult) error {
	if g.name != "" && g.heartbeat != "" && !g.fresh && g.kept == 0 {
		if err := p.removeKey(ctx, g.heartbeat); err != nil {
			return err
		}
		res.Deleted++
		res.Runs = append(res.Runs, strings.TrimSuffix(g.name, "/"))
	}
	*g = groupState{}
	return nil
}

// sweepUploads aborts stale multipart uploads at the end of a full sweep and
// returns how many.
func (p *Probe) sweepUploads(ctx context.Context, now time.Time) int {
	// Once per full sweep: unfinished multipart uploads hold space (Swift
	// keeps their parts in <bucket>+segments) and no listing of objects shows them.
	// Its failure does not fail the pass: the objects were collected.
	aborted, uerr := p.abortStaleUploads(ctx, now)
	if uerr != nil {
		if c := probes.CauseOf(uerr); (c == probes.CauseSetup || c == probes.CauseAuth) && !p.uploadsWarned.Swap(true) {
			p.logger.Warn("the collector cannot list or abort the canary's unfinished multipart uploads, so those of failed puts stay until a lifecycle rule aborts them (grant s3:ListBucketMultipartUploads and s3:AbortMultipartUpload; see docs/s3.md)",
				"prefix", p.base, "err", uerr)
		} else {
			p.logger.Debug("collector: aborting stale multipart uploads failed; retrying next pass", "err", uerr)
		}
	}
	return aborted
}

// abortStaleUploads aborts the canary's unfinished multipart uploads (keys of
// its own layout under the target's prefix, this run's too) initiated at
// least abandoned_after before now (server time). A multipart put of a live
// process lasts at most its op timeout, so such an upload belongs to a put
// that failed or a process that died mid-upload; a lifecycle rule's
// AbortIncompleteMultipartUpload does the same where the store has one.
// Bounded like a pass: gcMaxListed uploads listed, gcMaxDeleted aborted.
func (p *Probe) abortStaleUploads(ctx context.Context, now time.Time) (int, error) {
	var stale []minio.ObjectMultipartInfo
	listed, err := p.listUploads(ctx, p.base, "", func(u minio.ObjectMultipartInfo) {
		if p.staleUpload(u, now) {
			stale = append(stale, u)
		}
	})
	if err == nil && listed == 0 {
		// MinIO lists uploads only for an exact key or for the whole bucket:
		// a prefix gets an empty answer. List the bucket from the prefix on.
		_, err = p.listUploads(ctx, "", strings.TrimSuffix(p.base, "/"), func(u minio.ObjectMultipartInfo) {
			if p.staleUpload(u, now) {
				stale = append(stale, u)
			}
		})
	}
	if err != nil {
		return 0, p.classify("list multipart uploads (collector)", p.base, err)
	}
	aborted := 0
	for _, u := range stale {
		if aborted >= p.gcMaxDeleted {
			break
		}
		if err := p.core.AbortMultipartUpload(ctx, p.cfg.Bucket, u.Key, u.UploadID); err != nil {
			if s3Code(err) == "NoSuchUpload" {
				continue // completed or aborted meanwhile
			}
			return aborted, p.classify("abort multipart upload (collector)", u.Key, err)
		}
		aborted++
	}
	return aborted, nil
}

// staleUpload reports whether the collector aborts an upload: under the
// target's prefix, of the canary's own layout, initiated abandoned_after ago.
func (p *Probe) staleUpload(u minio.ObjectMultipartInfo, now time.Time) bool {
	if !strings.HasPrefix(u.Key, p.base) || u.UploadID == "" || now.Sub(u.Initiated) < p.abandonedAfter {
		return false
	}
	kind, _ := parseKey(u.Key[len(p.base):])
	return kind != keyForeign
}

// uploadsDelimiter is a delimiter no canary key contains, so it groups
// nothing of the canary's. It is not empty because minio-go always sends the
// parameter and Swift's s3api (2.30) takes an empty delimiter=
// as one that matches right after the prefix: every upload then folds into
// a single common prefix and none is listed.
const uploadsDelimiter = "|"

// listUploads pages through the bucket's multipart uploads under prefix
// after keyMarker, calling fn for those under the target's prefix, up to
// gcMaxListed uploads; it stops at the first key past the target's prefix.
func (p *Probe) listUploads(ctx context.Context, prefix, keyMarker string, fn func(minio.ObjectMultipartInfo)) (int, error) {
	listed, idMarker := 0, ""
	for listed < p.gcMaxListed {
		res, err := p.core.ListMultipartUploads(ctx, p.cfg.Bucket, prefix, keyMarker, idMarker, uploadsDelimiter, min(1000, p.gcMaxListed-listed))
		if err != nil {
			return listed, err
		}
		for _, u := range res.Uploads {
			if u.Key > p.base && !strings.HasPrefix(u.Key, p.base) {
				return listed, nil // sorted by key: the rest is past the prefix
			}
			listed++
			fn(u)
		}
		if !res.IsTruncated || len(res.Uploads) == 0 || (res.NextKeyMarker == keyMarker && res.NextUploadIDMarker == idMarker) {
			return listed, nil
		}
		keyMarker, idMarker = res.NextKeyMarker, res.NextUploadIDMarker
	}
	return listed, nil
}

func (p *Probe) removeKey(ctx context.Context, key string) error {
	if !strings.HasPrefix(key, p.base) {
		return fmt.Errorf("%s: refusing to delete %s outside the canary prefix %s", p.where, key, p.base)
	}
	if err := p.client.RemoveObject(ctx, p.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return p.classify("delete (collector)", key, err)
	}
	return nil
}

func (p *Probe) logCollect(res gcResult, err error) {
	if err != nil {
		if c := probes.CauseOf(err); c == probes.CauseSetup || c == probes.CauseAuth {
			if !p.gcWarned.Swap(true) {
				p.logger.Warn("the collector of abandoned canary objects cannot work, so objects of crashed dbcanary processes stay until the lifecycle rule expires them (see docs/s3.md)",
					"prefix", p.base, "err", err)
			}
		} else {
			p.logger.Debug("collector pass failed; retrying later", "err", err)
		}
		return
	}
	if res.Deleted > 0 {
		p.logger.Info("deleted canary objects of abandoned dbcanary runs", "prefix", p.base, "objects", res.Deleted, "runs", res.Runs)
	}
	if res.Aborted > 0 {
		p.logger.Info("aborted unfinished canary multipart uploads older than abandoned_after", "prefix", p.base, "uploads", res.Aborted)
	}
}

// removeRun deletes every object under this run's prefix, its heartbeat last,
// within ctx. Nobody else writes there.
func (p *Probe) removeRun(ctx context.Context) (int, error) {
	removed := 0
	keys, err := p.listRun(ctx)
	// A bench run may leave more than one listing holds (s3-sizes' new
	// objects): delete each full listing and list again.
	for err == nil && len(keys) >= p.runListed {
		if err = p.removeBatch(ctx, keys); err == nil {
			removed += len(keys)
			keys, err = p.listRun(ctx)
		}
	}
	if err != nil {
		return removed, err
	}
	// The listing may lag behind the newest writes (Swift updates listings
	// asynchronously): delete what this run knows it wrote as well (deleting
	// a key that is not there succeeds).
	listed := make(map[string]bool, len(keys))
	for _, k := range keys {
		listed[k] = true
	}
	for _, k := range p.live.keys() {
		if !listed[k] {
			keys = append(keys, k)
		}
	}
	if len(keys) > batchDeleteOver {
		if err := p.removeBatch(ctx, keys); err != nil {
			return removed, err
		}
		removed += len(keys)
		keys = nil
	}
	keys = append(keys, p.heartbeat) // last, listed or not: Close runs only after a write
	for i, key := range keys {
		if err := p.client.RemoveObject(ctx, p.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return removed + i, p.classify("delete", key, err)
		}
	}
	return removed + len(keys), nil
}

// listRun lists up to runListed keys under this run's prefix, its heartbeat left out.
func (p *Probe) listRun(ctx context.Context) ([]string, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var keys []string
	for info := range p.client.ListObjects(lctx, p.cfg.Bucket, minio.ListObjectsOptions{Prefix: p.prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, p.classify("list", p.prefix, info.Err)
		}
		if !strings.HasPrefix(info.Key, p.prefix) || info.Key == p.heartbeat {
			continue
		}
		if keys = append(keys, info.Key); len(keys) >= p.runListed {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, p.classify("list", p.prefix, err)
	}
	return keys, nil
}

// batchDeleteOver is how many objects a run may leave before Close deletes
// them with multi-object DELETEs: the canary's own few go one by one (every
// store has DELETE), a bench's thousands (s3-recycle) 1000 per request, so
// they fit in closeTimeout.
const batchDeleteOver = 256

// removeBatch deletes keys with multi-object DELETE requests; the first
// failure is returned once every batch has been answered.
func (p *Probe) removeBatch(ctx context.Context, keys []string) error {
	ch := make(chan minio.ObjectInfo)
	go func() {
		defer close(ch)
		for _, k := range keys {
			select {
			case ch <- minio.ObjectInfo{Key: k}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var first error
	for e := range p.client.RemoveObjects(ctx, p.cfg.Bucket, ch, minio.RemoveObjectsOptions{}) {
		if e.Err != nil && first == nil {
			first = p.classify("delete (multi-object)", e.ObjectName, e.Err)
		}
	}
	if first == nil && ctx.Err() != nil {
		first = p.classify("delete (multi-object)", p.prefix, ctx.Err())
	}
	return first
}

// Close stops the heartbeat and deletes everything this run wrote (objects,
// then the heartbeat), bounded to closeTimeout (10 s). A daemon and a one-shot
// (Ephemeral) run do the same: the run's prefix is its own. What a crash
// leaves is removed by the collector of another live instance.
func (p *Probe) Close() error {
	p.stopBackground()
	defer p.tr.CloseIdleConnections()
	lctx, lcancel := context.WithTimeout(context.Background(), p.closeTimeout)
	p.removeLedgerObjects(lctx)
	lcancel()
	if !p.wrote.Load() {
		return nil // never wrote anything (the store was down, or Prepare never ran)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.closeTimeout+p.live.closeAllowance())
	defer cancel()
	_, err := p.removeRun(ctx)
	if err != nil && errors.Is(err, probes.ErrNamespaceGone) {
		return nil // the bucket is gone, and everything in it
	}
	return err
}
