package s3

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

// Probe is the S3 canary for one target.
type Probe struct {
	cfg      Config
	target   string
	where    string // "s3 <endpoint> bucket <bucket>" for error messages
	base     string // <prefix>: the lifecycle rule's and the collector's scope, shared by instances
	prefix   string // <prefix><instance>/<run>/: the only keys this process writes
	instance string
	run      string // random per process: see gc.go
	started  time.Time
	client   *minio.Client
	core     minio.Core
	tr       *http.Transport
	live     *liveSet
	logger   *slog.Logger
	ops      map[string]opRef
	bufPool  sync.Pool
	lifeDone atomic.Bool // the lifecycle rule is set, or cannot be

	heartbeat      string // <prefix><instance>/<run>/.heartbeat
	ephemeral      bool   // a one-shot run: no collector
	abandonedAfter time.Duration
	heartbeatEvery time.Duration
	gcEvery        time.Duration
	gcFirstAfter   time.Duration
	gcMaxListed    int
	gcMaxDeleted   int
	closeTimeout   time.Duration
	runListed      int // keys Close deletes per listing of its run (maxListed; tests lower it)
	bg             background
	gc             gcState
	gcWarned       atomic.Bool
	uploadsWarned  atomic.Bool // the collector cannot abort multipart uploads: warned once
	gcPasses       atomic.Int64
	wrote          atomic.Bool // something was written under the prefix: Close has work
	ledger         *probes.Ledger
}

// opRef is what an op name stands for.
type opRef struct {
	kind string
	size Size
}

// New builds the probe; it does no I/O.
func New(t probes.Target) (*Probe, error) {
	pc, ok := t.Config.(*Config)
	if !ok {
		return nil, fmt.Errorf("s3: config of type %T, want *s3.Config", t.Config)
	}
	cfg := *pc
	client, tr, err := newClient(&cfg, t)
	if err != nil {
		return nil, err
	}
	base := cfg.Prefix
	if base == "" {
		base = "dbcanary/" + t.Name + "/"
	}
	run := newRunID()
	p := &Probe{
		cfg:      cfg,
		target:   t.Name,
		where:    fmt.Sprintf("s3 %s bucket %s", cfg.Endpoint, cfg.Bucket),
		base:     base,
		prefix:   base + t.InstanceID + "/" + run + "/",
		instance: t.InstanceID,
		run:      run,
		started:  time.Now(),
		client:   client,
		core:     minio.Core{Client: client},
		tr:       tr,
		logger:   t.Logger,
		ops:      map[string]opRef{OpList: {kind: OpList}},

		ephemeral:      t.Ephemeral,
		abandonedAfter: cfg.AbandonedAfter,
		heartbeatEvery: heartbeatEvery,
		gcEvery:        gcEvery,
		gcFirstAfter:   gcFirstAfter,
		gcMaxListed:    gcMaxListed,
		gcMaxDeleted:   gcMaxDeleted,
		closeTimeout:   closeTimeout,
		runListed:      maxListed,
	}
	p.heartbeat = p.prefix + heartbeatName
	p.live = newLiveSet(p.prefix, cfg.MaxObjectsPerSize)
	p.live.recycle = cfg.recycle
	p.live.fresh = cfg.freshKeys
	for _, s := range cfg.Sizes {
		for _, k := range []string{OpPut, OpGet, OpHead, OpDelete} {
			p.ops[OpName(k, s)] = opRef{kind: k, size: s}
		}
	}
	p.ledgerOps(t.Ledger)
	p.bufPool.New = func() any { b := make([]byte, 2*verifyBuf); return &b }
	if p.logger == nil {
		p.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TLS.InsecureSkipVerify {
		p.logger.Warn("TLS certificate verification is disabled for this target (tls.insecure_skip_verify)")
	}
	return p, nil
}

// newClient builds the S3 client of cfg and its HTTP transport: one attempt
// per request, no transparent gzip, TLS when the endpoint or cfg.TLS asks.
func newClient(cfg *Config, t probes.Target) (*minio.Client, *http.Transport, error) {
	host, secure, err := parseEndpoint(cfg.Endpoint, cfg.TLS.Enabled)
	if err != nil {
		return nil, nil, fmt.Errorf("endpoint: %w", err)
	}
	if cfg.TLS.Configured() {
		secure = true
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		ExpectContinueTimeout: time.Second,
		// Bodies are compared byte for byte and timed: no transparent gzip.
		DisableCompression:     true,
		MaxResponseHeaderBytes: 1 << 20, // a broken server's huge header must not cost the canary memory
	}
	if secure {
		tc, err := cfg.TLS.Build("", t.Certs)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: %w", err)
		}
		if cfg.TLS.ServerName == "" {
			// Virtual-host requests go to <bucket>.<host>: let Go check each request's own host.
			tc.ServerName = ""
		}
		tr.TLSClientConfig = tc
	}
	lookup := minio.BucketLookupAuto
	switch cfg.Addressing {
	case "path":
		lookup = minio.BucketLookupPath
	case "virtual":
		lookup = minio.BucketLookupDNS
	}
	client, err := minio.New(host, &minio.Options{
		Creds:        newCredentials(cfg),
		Secure:       secure,
		Transport:    tr,
		Region:       cfg.Region,
		BucketLookup: lookup,
		// One attempt: a canary reports what a client saw, it does not hide it behind retries.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("endpoint %s: %w", cfg.Endpoint, err)
	}
	client.SetAppInfo("dbcanary", "")
	return client, tr, nil
}

// Prefix returns the key prefix of this process's canary objects.
func (p *Probe) Prefix() string { return p.prefix }

// Bucket returns the canary bucket.
func (p *Probe) Bucket() string { return p.cfg.Bucket }

// Run implements probes.Probe.
func (p *Probe) Run(ctx context.Context, op string, out *probes.Outcome) error {
	ref, ok := p.ops[op]
	if !ok {
		return fmt.Errorf("s3: unknown op %q", op)
	}
	switch ref.kind {
	case OpPut:
		return p.put(ctx, ref.size, out)
	case OpGet:
		return p.get(ctx, ref.size, out)
	case OpHead:
		return p.head(ctx, ref.size, out)
	case OpDelete:
		return p.delete(ctx, ref.size, out)
	case probes.OpLedgerWrite:
		return p.ledgerWrite(ctx, out)
	case probes.OpLedgerCheck:
		return p.ledgerCheck(ctx, out)
	}
	return p.list(ctx, out)
}

// put writes a new object, or overwrites the oldest once the size has max objects.
func (p *Probe) put(ctx context.Context, s Size, out *probes.Outcome) error {
	o, _, ok := p.live.forWrite(s)
	if !ok {
		return probes.Fail(probes.CauseOther, fmt.Errorf("%s: every %s canary object is in use by another op (max_in_flight is high for max_objects_per_size=%d)", p.where, s, p.cfg.MaxObjectsPerSize))
	}
	out.Sent = time.Now()
	return p.write(ctx, s, o, out, false)
}

// write uploads fresh content to o (marked busy) and records it, or forgets o on failure.
// keep leaves o busy for the caller's next request on it.
func (p *Probe) write(ctx context.Context, s Size, o *object, out *probes.Outcome, keep bool) error {
	seed := rand.Uint64()
	opts := putOptions("application/octet-stream")
	opts.PartSize = uint64(p.cfg.MultipartThreshold)
	info, err := p.client.PutObject(ctx, p.cfg.Bucket, o.key, newContent(seed, int64(s)), int64(s), opts)
	if err != nil {
		// Whether the object now holds the old, the new or no content is
		// unknown: keep it as suspect, so it is never read but is the first to
		// be deleted or overwritten (deleting a key that does not exist succeeds).
		err = p.classify("put", o.key, err)
		p.live.mu.Lock()
		o.busy, o.changing, o.suspect = false, false, true
		p.live.mu.Unlock()
		return err
	}
	out.BytesSent += int64(s)
	p.live.written(s, o, seed, info.ETag, time.Now(), keep)
	return nil
}

// putOptions are the options of every PUT the canary makes (objects,
// multipart parts, heartbeat, ledger): the payload is sent unsigned
// (x-amz-content-sha256: UNSIGNED-PAYLOAD). Over plain HTTP minio-go would
// otherwise sign it as a streaming upload (STREAMING-AWS4-HMAC-SHA256-PAYLOAD,
// aws-chunked), which some stores refuse with 501 NotImplemented (OpenStack
// Swift's s3api) and which costs a hash of every chunk (0.62x warp's PUT
// rate). Nothing is lost: the request is still signed, and every byte the
// canary writes is verified when read back (get, ledger_check).
func putOptions(contentType string) minio.PutObjectOptions {
	return minio.PutObjectOptions{ContentType: contentType, DisableContentSha256: true}
}

// readTarget returns an object to read; when none is readable yet (just
// started, or all were deleted) it writes one first and returns how long that
// took: the caller marks the request sent only after it (service time covers
// the read alone) and leaves it out of the phases.
func (p *Probe) readTarget(ctx context.Context, s Size, out *probes.Outcome) (*object, time.Duration, error) {
	if o := p.live.forRead(s, time.Now()); o != nil {
		return o, 0, nil
	}
	o, _, ok := p.live.forWrite(s)
	if !ok {
		return nil, 0, probes.Fail(probes.CauseOther, fmt.Errorf("%s: no %s canary object is free to read", p.where, s))
	}
	start := time.Now()
	var setup probes.Outcome
	if err := p.write(ctx, s, o, &setup, true); err != nil {
		return nil, 0, fmt.Errorf("writing the %s object to read first: %w", s, err)
	}
	out.BytesSent += setup.BytesSent
	return o, time.Since(start), nil
}

// phaseOrigin is where the get phases count from: the op's intended start, as
// its latency, so a stall before the request was sent (the op started late
// because every worker was busy or the in-flight bound was reached, or it
// waited on a Prepare) shows in the phases the latency alerts use. Only the canary's own setup write is left out: it is not
// part of a client's read. Service time (from Outcome.Sent) stays the send.
func phaseOrigin(out *probes.Outcome, setup time.Duration, sent time.Time) time.Time {
	origin := out.Intended
	if origin.IsZero() {
		return sent
	}
	origin = origin.Add(setup)
	if origin.After(sent) {
		return sent
	}
	return origin
}

// get reads an object back, timing the first and the last body byte from the
// op's intended start (phaseOrigin), and compares every byte with what was written.
func (p *Probe) get(ctx context.Context, s Size, out *probes.Outcome) error {
	o, setup, err := p.readTarget(ctx, s, out)
	if err != nil {
		return err
	}
	suspect := false
	defer func() { p.live.release(o, suspect) }()
	sent := time.Now()
	out.Sent = sent
	origin := phaseOrigin(out, setup, sent)
	body, _, _, err := p.core.GetObject(ctx, p.cfg.Bucket, o.key, minio.GetObjectOptions{})
	if err != nil {
		err = p.classifyRead(ctx, "get", o, err)
		if probes.CauseOf(err) == probes.CauseNotFound {
			p.live.remove(s, o)
		}
		return err
	}
	defer body.Close()
	bp := p.bufPool.Get().(*[]byte)
	defer p.bufPool.Put(bp)
	buf := (*bp)[:verifyBuf]
	v := verifier{seed: o.seed, size: o.size, expected: (*bp)[verifyBuf:]}
	var first time.Duration
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if first == 0 {
				first = time.Since(origin)
			}
			out.BytesReceived += int64(n)
			if verr := v.check(buf[:n]); verr != nil {
				suspect = true
				return probes.Fail(probes.CauseMismatch, fmt.Errorf("%s: get %s: %w", p.where, o.key, verr))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return p.classify(fmt.Sprintf("get (after %d of %d bytes)", v.got, o.size), o.key, rerr)
		}
	}
	last := time.Since(origin)
	if verr := v.done(); verr != nil {
		suspect = true
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("%s: get %s: %w", p.where, o.key, verr))
	}
	out.AddPhase(PhaseFirstByte, first)
	out.AddPhase(PhaseLastByte, last)
	return nil
}

// head checks an object's size and ETag without reading it.
func (p *Probe) head(ctx context.Context, s Size, out *probes.Outcome) error {
	o, _, err := p.readTarget(ctx, s, out)
	if err != nil {
		return err
	}
	suspect := false
	defer func() { p.live.release(o, suspect) }()
	out.Sent = time.Now()
	info, err := p.client.StatObject(ctx, p.cfg.Bucket, o.key, minio.StatObjectOptions{})
	if err != nil {
		err = p.classifyRead(ctx, "head", o, err)
		if probes.CauseOf(err) == probes.CauseNotFound {
			p.live.remove(s, o)
		}
		return err
	}
	if info.Size != o.size || (o.etag != "" && info.ETag != "" && info.ETag != o.etag) {
		suspect = true
		return probes.Fail(probes.CauseMismatch, fmt.Errorf("%s: head %s: size %d and ETag %q, but %d bytes with ETag %q were written",
			p.where, o.key, info.Size, info.ETag, o.size, o.etag))
	}
	return nil
}

// delete removes the oldest object of the size, keeping one for get and
// head; when there is none to spare it writes one first (not timed as sent).
func (p *Probe) delete(ctx context.Context, s Size, out *probes.Outcome) error {
	o := p.live.forDelete(s, time.Now())
	if o == nil {
		o = p.live.scratch(s)
		var setup probes.Outcome
		if err := p.write(ctx, s, o, &setup, true); err != nil {
			return fmt.Errorf("writing a %s object to delete first: %w", s, err)
		}
		out.BytesSent += setup.BytesSent
		p.live.mu.Lock()
		o.changing = true
		p.live.mu.Unlock()
	}
	out.Sent = time.Now()
	err := p.client.RemoveObject(ctx, p.cfg.Bucket, o.key, minio.RemoveObjectOptions{})
	if err != nil {
		err = p.classify("delete", o.key, err)
		if probes.CauseOf(err) == probes.CauseNotFound {
			p.live.remove(s, o)
		} else {
			// Deleted or not, the object is no longer known intact: delete it again later.
			p.live.mu.Lock()
			o.changing = false
			p.live.mu.Unlock()
			p.live.release(o, true)
		}
		return err
	}
	p.live.remove(s, o)
	return nil
}

// maxListed bounds a listing of this run's prefix, which holds at most
// 2 x sizes x max_objects_per_size objects and the heartbeat.
const maxListed = 10000

// list lists this process's prefix and, with list_consistency, checks that
// every object written before the listing started is in it.
func (p *Probe) list(ctx context.Context, out *probes.Outcome) error {
	expected := p.live.expected(time.Now())
	out.Sent = time.Now()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := make(map[string]bool, len(expected))
	n := 0
	for info := range p.client.ListObjects(lctx, p.cfg.Bucket, minio.ListObjectsOptions{Prefix: p.prefix, Recursive: true}) {
		if info.Err != nil {
			return p.classify("list", p.prefix, info.Err)
		}
		if !strings.HasPrefix(info.Key, p.prefix) {
			return probes.Fail(probes.CauseServer, fmt.Errorf("%s: listing prefix %s returned key %s outside it", p.where, p.prefix, info.Key))
		}
		seen[info.Key] = true
		if n++; n >= maxListed {
			break
		}
	}
	if err := ctx.Err(); err != nil {
		return p.classify("list", p.prefix, err)
	}
	if !p.cfg.ListConsistency || n >= maxListed {
		return nil
	}
	var missing []listed
	for _, e := range expected {
		if !seen[e.obj.key] && p.live.unchanged(e) {
			missing = append(missing, e)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return p.listingLag(ctx, out.Sent, missing)
}

// maxLagHeads bounds the HEADs one list makes for keys its listing missed.
const maxLagHeads = 16

// listingLag decides what keys missing from a listing mean. Listings of many
// stores are eventually consistent (Swift updates them asynchronously, and
// later still when a container server was down), so a listing alone never
// reports data loss: each missing key is HEADed. A key is not_found only if
// HEAD does not find it either AND it was written at least listing_grace
// before the listing began. Otherwise the listing lags behind the store's
// objects, and the op fails with cause stale (a read missed a write that the
// store's consistency allows it to miss), which pages nobody as data loss.
func (p *Probe) listingLag(ctx context.Context, listed time.Time, missing []listed) error {
	found, notYet := 0, 0
	var oldest time.Time
	for i, e := range missing {
		if i >= maxLagHeads {
			break // the rest count as lagging: the HEADs are bounded, the verdict is the same
		}
		_, err := p.client.StatObject(ctx, p.cfg.Bucket, e.obj.key, minio.StatObjectOptions{})
		if err != nil {
			err = p.classify("head (not listed)", e.obj.key, err)
			if probes.CauseOf(err) != probes.CauseNotFound {
				return err
			}
			if !p.live.unchanged(e) {
				continue // deleted or rewritten by another op meanwhile
			}
			if age := listed.Sub(e.written); age >= p.cfg.ListingGrace {
				return probes.Fail(probes.CauseNotFound, fmt.Errorf("%s: listing %s does not show %s, written at %s (%s before the listing, listing_grace %s) and not deleted, and HEAD does not find it either: the object is gone",
					p.where, p.prefix, e.obj.key, e.written.Format(time.RFC3339Nano), age.Round(time.Millisecond), p.cfg.ListingGrace))
			}
			notYet++
		} else {
			found++
		}
		if oldest.IsZero() || e.written.Before(oldest) {
			oldest = e.written
		}
	}
	if found == 0 && notYet == 0 {
		return nil // every missing key changed while it was checked
	}
	lag := listed.Sub(oldest).Round(time.Millisecond)
	why := "within listing_grace: the store's listings are eventually consistent (on Swift a container server was busy or down and object-updater has not replayed the update yet), not data loss"
	if lag >= p.cfg.ListingGrace {
		why = "for longer than listing_grace: the store's listing index is stuck behind its objects (on Swift: check the container servers and swift-object-updater), not data loss"
	}
	msg := fmt.Sprintf("%s: listing %s lags: %d of the objects written before it are not listed (%d found by HEAD", p.where, p.prefix, len(missing), found)
	if notYet > 0 {
		msg += fmt.Sprintf(", %d not found by HEAD yet: not_found if still so once written listing_grace ago", notYet)
	}
	return probes.Fail(probes.CauseStale, fmt.Errorf("%s); the oldest was written %s before the listing (listing_grace %s), %s", msg, lag, p.cfg.ListingGrace, why))
}
