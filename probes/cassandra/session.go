package cassandra

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

// noHostsRebuild is how long every request may fail with "no hosts available"
// before the session is rebuilt from the contact points: the driver redials
// down nodes by itself, this only covers a ring it lost track of entirely.
const noHostsRebuild = 30 * time.Second

// newRedial is the session's connect backoff.
func newRedial() probes.Backoff { return probes.Backoff{Min: time.Second, Max: 30 * time.Second} }

// session returns the shared session, creating it if needed. After a failed
// connect, ops fail fast with the last error during a backoff of 1 s doubling
// to 30 s, so a down cluster costs nothing but a counter.
func (p *Probe) session(ctx context.Context) (*gocql.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil && !p.sess.Closed() {
		return p.sess, nil
	}
	if err := p.redial.Wait(time.Now()); err != nil {
		return nil, err
	}
	s, err := p.connect(ctx)
	if err != nil {
		p.redial.Fail(time.Now(), err)
		return nil, err
	}
	p.redial.Succeed()
	p.sess, p.noHostsSince = s, time.Time{}
	p.live.Store(&liveSession{s, p.filter, p.conns})
	p.logger.Debug("connected", "hosts", p.hostList)
	return s, nil
}

func (p *Probe) connect(ctx context.Context) (*gocql.Session, error) {
	cl := gocql.NewCluster(p.cfg.Hosts...)
	cl.Port = p.cfg.Port
	cl.ConnectTimeout = p.cfg.ConnectTimeout
	cl.Timeout = p.cfg.RequestTimeout
	cl.ReconnectInterval = p.cfg.ReconnectInterval
	cl.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 3, Interval: min(time.Second, p.cfg.ReconnectInterval)}
	cl.NumConns = 1 // a canary's rate needs no more, and the driver multiplexes streams
	// Every canary read is a point read by the full primary key (one row at
	// most) or a small system table. With a page size the server runs each
	// through its pager: 15-20 % more of its CPU per read, for pages that
	// never come (docs/evidence/measurements.md, "The page size").
	cl.PageSize = 0
	cl.Consistency = gocql.One // every statement sets its own level
	cl.SocketKeepalive = 30 * time.Second
	cl.MaxWaitSchemaAgreement = 30 * time.Second
	if d, ok := ctx.Deadline(); ok && time.Until(d) < cl.ConnectTimeout {
		cl.ConnectTimeout = max(time.Until(d), 100*time.Millisecond)
	}
	fallback := gocql.RoundRobinHostPolicy()
	if p.cfg.LocalDC != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(p.cfg.LocalDC)
	}
	cl.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(fallback)
	if p.cfg.PinHosts {
		f, err := p.pinnedHosts(ctx)
		if err != nil {
			return nil, err
		}
		cl.HostFilter = f
	}
	p.filter = cl.HostFilter
	if p.cfg.Username != "" {
		password, err := p.cfg.Password().Value()
		if err != nil {
			return nil, probes.Fail(probes.CauseAuth, fmt.Errorf("cassandra %s: password: %w", p.hostList, err))
		}
		cl.Authenticator = gocql.PasswordAuthenticator{Username: p.cfg.Username, Password: password}
	}
	var tc *tls.Config
	if p.cfg.TLS.Configured() {
		// An empty server name lets the driver check each node's own address.
		var err error
		if tc, err = p.cfg.TLS.Build("", p.certs); err != nil {
			return nil, err
		}
	}
	dialer := newGuardedDialer(cl.ConnectTimeout, cl.Timeout, tc)
	cl.HostDialer = dialer
	p.conns = dialer.conns
	cl.QueryObserver = coordObserver{} // failed ops name their coordinator (coordinator.go)
	cl.ProtoVersion = 4                // the frame guard parses v4 frames; every Cassandra since 2.2 speaks v4
	s, err := cl.CreateSession()
	if err != nil {
		return nil, p.classify("connect", err)
	}
	return s, nil
}

// noteResult watches for a session that lost every host for too long and
// drops it, so the next op rebuilds it from the contact points.
func (p *Probe) noteResult(s *gocql.Session, err error) {
	if err != nil && !errors.Is(err, gocql.ErrNoConnections) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != s {
		return
	}
	switch {
	case err == nil:
		p.noHostsSince = time.Time{}
	case p.noHostsSince.IsZero():
		p.noHostsSince = time.Now()
	case time.Since(p.noHostsSince) > noHostsRebuild:
		p.logger.Info("no Cassandra host reachable for a while: rebuilding the session", "for", time.Since(p.noHostsSince).Round(time.Second))
		s.Close()
		p.sess, p.noHostsSince = nil, time.Time{}
		p.live.Store(nil)
	}
}

// pinnedHosts is the filter of pin_hosts: a node is used only if its address
// is one the configured hosts resolve to. (gocql's WhiteListHostFilter panics
// when a name does not resolve; this says which one, as cause dns.)
func (p *Probe) pinnedHosts(ctx context.Context) (gocql.HostFilter, error) {
	allowed := map[string]bool{}
	for _, h := range p.cfg.Hosts {
		host := h
		if hh, _, err := net.SplitHostPort(h); err == nil {
			host = hh
		}
		if ip := net.ParseIP(host); ip != nil {
			allowed[ip.String()] = true
			continue
		}
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, probes.Fail(probes.CauseDNS, fmt.Errorf("cassandra %s: pin_hosts: resolve %s: %w", p.hostList, host, err))
		}
		for _, a := range addrs {
			allowed[a.IP.String()] = true
		}
	}
	return gocql.HostFilterFunc(func(h *gocql.HostInfo) bool { return allowed[h.ConnectAddress().String()] }), nil
}
