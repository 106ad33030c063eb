package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/dbcanary/dbcanary/probes"
)

// The durability ledger's objects live under <prefix><instance>/ledger/,
// outside every run prefix: a restart of dbcanary (whose Close removes its
// run's objects) keeps them, and the collector never matches them. They are
// deleted after their last intact check, and by the lifecycle rule
// (lifecycleDays) if dbcanary forgets them (its ledger file was lost).
const (
	ledgerDir  = "ledger/"
	ledgerSize = 4 * KiB
)

// ledgerLimit is the longest ledger age the store keeps an object: the
// collector deletes ledger objects older than abandoned_after (those of an
// instance id that changed at a rollout would stay forever otherwise), less
// an hour for clock skew; the lifecycle rule, where set, expires everything
// under the prefix after lifecycleDays.
func (c *Config) ledgerLimit() (time.Duration, string) {
	limit := c.AbandonedAfter - time.Hour
	why := fmt.Sprintf("the collector deletes ledger objects older than abandoned_after (%s), and an hour is kept for clock skew", fmtHours(c.AbandonedAfter))
	if c.LifecycleExpiry && lifecycleDays*24*time.Hour < limit {
		limit = lifecycleDays * 24 * time.Hour
		why = fmt.Sprintf("the lifecycle rule (lifecycle_expiry) deletes canary objects after %d day", lifecycleDays)
	}
	return limit, why
}

// ledgerForgetAfter is the age past which an entry is forgotten unchecked
// (dbcanary was down past its last check): the collector or the lifecycle
// rule may have deleted its object by design. It leaves the last check
// (at most ledgerLimit) half an hour to run.
func (c *Config) ledgerForgetAfter() time.Duration {
	limit := c.AbandonedAfter
	if c.LifecycleExpiry {
		limit = min(limit, lifecycleDays*24*time.Hour)
	}
	return limit - 30*time.Minute
}

// ledgerOps adds the ledger's ops and keeps l, the target's ledger
// (probes.Target.Ledger; nil when none was opened).
func (p *Probe) ledgerOps(l *probes.Ledger) {
	p.ledger = l
	p.ops[probes.OpLedgerWrite] = opRef{kind: probes.OpLedgerWrite}
	p.ops[probes.OpLedgerCheck] = opRef{kind: probes.OpLedgerCheck}
}

// Ledger returns the probe's durability ledger.
func (p *Probe) Ledger() *probes.Ledger { return p.ledger }

// ledgerWrite puts one object of random content and, once the store
// acknowledged it, records its key and checksum in the ledger.
func (p *Probe) ledgerWrite(ctx context.Context, out *probes.Outcome) error {
	body := make([]byte, ledgerSize)
	_, _ = rand.Read(body)
	var id [8]byte
	_, _ = rand.Read(id[:])
	key := fmt.Sprintf("%s%s/%s%x", p.base, p.instance, ledgerDir, id)
	out.Sent = time.Now()
	_, err := p.client.PutObject(ctx, p.cfg.Bucket, key, bytes.NewReader(body), int64(len(body)), putOptions("application/octet-stream"))
	if err != nil {
		return p.classify("put (ledger)", key, err)
	}
	acked := time.Now()
	out.BytesSent += int64(len(body))
	p.wrote.Store(true)
	if err := p.ledger.Add(probes.LedgerEntry{Key: key, Where: "s3://" + p.cfg.Bucket, Sum: probes.LedgerSum(body), Size: int64(len(body)), Acked: acked, Setting: "PUT"}); err != nil {
		p.logger.Warn("durability ledger: cannot save the file; the write is still checked while this process runs", "err", err)
	}
	return nil
}

// ledgerCheck reads back, byte for byte, the ledger's objects that reached a check age.
func (p *Probe) ledgerCheck(ctx context.Context, out *probes.Outcome) error {
	out.Sent = time.Now()
	after := p.cfg.ledgerForgetAfter()
	if n, err := p.ledger.Forget(time.Now().Add(-after)); n > 0 {
		p.logger.Info("durability ledger: forgot entries older than the collector and lifecycle rule leave objects (dbcanary was down past their check)", "entries", n, "older_than", after, "err", err)
	}
	read := func(ctx context.Context, d probes.LedgerDue) (probes.LedgerResult, error) {
		body, _, _, err := p.core.GetObject(ctx, p.cfg.Bucket, d.Key, minio.GetObjectOptions{})
		if err != nil {
			err = p.classify("get (ledger)", d.Key, err)
			if probes.CauseOf(err) == probes.CauseNotFound {
				return probes.LedgerMissing, nil
			}
			return "", err
		}
		defer body.Close()
		data, err := io.ReadAll(io.LimitReader(body, d.Size+1))
		if err != nil {
			return "", p.classify("get (ledger)", d.Key, err)
		}
		out.BytesReceived += int64(len(data))
		if probes.LedgerSum(data) != d.Sum {
			return probes.LedgerCorrupted, nil
		}
		return probes.LedgerIntact, nil
	}
	forget := func(ctx context.Context, d probes.LedgerDue) {
		if err := p.client.RemoveObject(ctx, p.cfg.Bucket, d.Key, minio.RemoveObjectOptions{}); err != nil {
			p.logger.Debug("durability ledger: cannot delete a checked object; the lifecycle rule will", "key", d.Key, "err", err)
		}
	}
	return p.ledger.Check(ctx, read, forget)
}

// removeLedgerObjects deletes a one-shot run's ledger objects.
func (p *Probe) removeLedgerObjects(ctx context.Context) {
	if p.ledger == nil || !p.ephemeral {
		return
	}
	for _, e := range p.ledger.Entries() {
		_ = p.client.RemoveObject(ctx, p.cfg.Bucket, e.Key, minio.RemoveObjectOptions{})
	}
}

// LedgerSettings implements probes.LedgerConfigured: the ages and bound the target's ledger is opened with.
func (c *Config) LedgerSettings() ([]time.Duration, int) {
	return c.Ledger.EffectiveAges(), c.Ledger.MaxEntries
}
