package cassandra

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// replicaSet is the canary keyspace's replication: per data centre, or one
// ring for SimpleStrategy (key ""). It decides whether a read is guaranteed
// to see a write: R + W > RF in the scope both levels count in.
type replicaSet struct {
	simple bool
	dcs    map[string]int
}

// configured is the replication the canary creates its keyspace with.
func (r *Replication) configured() replicaSet {
	if r.Class == "SimpleStrategy" {
		return replicaSet{simple: true, dcs: map[string]int{"": r.ReplicationFactor}}
	}
	return replicaSet{dcs: maps.Clone(r.Datacenters)}
}

// parseReplication reads system_schema.keyspaces.replication; ok is false
// for a strategy the canary does not model.
func parseReplication(m map[string]string) (replicaSet, bool) {
	rf := func(s string) (int, bool) {
		full, _, _ := strings.Cut(s, "/") // transient replication: "3/1"
		n, err := strconv.Atoi(full)
		return n, err == nil && n >= 0
	}
	class := m["class"]
	switch {
	case strings.HasSuffix(class, "SimpleStrategy"):
		n, ok := rf(m["replication_factor"])
		return replicaSet{simple: true, dcs: map[string]int{"": n}}, ok
	case strings.HasSuffix(class, "NetworkTopologyStrategy"):
		rs := replicaSet{dcs: map[string]int{}}
		for k, v := range m {
			if k == "class" {
				continue
			}
			n, ok := rf(v)
			if !ok {
				return replicaSet{}, false
			}
			rs.dcs[k] = n
		}
		return rs, len(rs.dcs) > 0
	}
	return replicaSet{}, false
}

func (rs replicaSet) String() string {
	if rs.simple {
		return fmt.Sprintf("SimpleStrategy, replication factor %d", rs.dcs[""])
	}
	var parts []string
	for _, dc := range slices.Sorted(maps.Keys(rs.dcs)) {
		parts = append(parts, fmt.Sprintf("%s: %d", dc, rs.dcs[dc]))
	}
	return "NetworkTopologyStrategy {" + strings.Join(parts, ", ") + "}"
}

func (rs replicaSet) equal(o replicaSet) bool {
	return rs.simple == o.simple && maps.Equal(rs.dcs, o.dcs)
}

func (rs replicaSet) total() int {
	n := 0
	for _, rf := range rs.dcs {
		n += rf
	}
	return n
}

// localRF is the replication factor of the data centre LOCAL_* levels count
// in: the whole ring for SimpleStrategy or a single data centre, local_dc's
// otherwise; unknown (-1) with several data centres and no local_dc, since
// the coordinator (and so the "local" data centre) may then differ per request.
func (rs replicaSet) localRF(localDC string) int {
	switch {
	case rs.simple || len(rs.dcs) == 1:
		return rs.total()
	case localDC != "":
		return rs.dcs[localDC]
	}
	return -1
}

// acked returns how many replicas a level guarantees took part, in the
// whole cluster and in the local data centre (local is 0 when unknown).
func (rs replicaSet) acked(cl gocql.Consistency, localDC string) (total, local int) {
	t, l := rs.total(), rs.localRF(localDC)
	// n replicas anywhere: at least n - (replicas outside the local DC) are local.
	anywhere := func(n int) (int, int) {
		n = min(n, t)
		if l < 0 {
			return n, 0
		}
		return n, max(0, n-(t-l))
	}
	minQuorum := t/2 + 1 // the smallest local quorum when the local DC is unknown
	for _, rf := range rs.dcs {
		minQuorum = min(minQuorum, rf/2+1)
	}
	switch cl {
	case gocql.Any:
		return 0, 0 // a hint may be all there is
	case gocql.One:
		return anywhere(1)
	case gocql.Two:
		return anywhere(2)
	case gocql.Three:
		return anywhere(3)
	case gocql.Quorum:
		return anywhere(t/2 + 1)
	case gocql.All:
		return t, max(l, 0)
	case gocql.LocalOne:
		if l < 0 {
			return 1, 0
		}
		return min(1, l), min(1, l)
	case gocql.LocalQuorum:
		if l < 0 {
			return minQuorum, 0
		}
		return l/2 + 1, l/2 + 1
	case gocql.EachQuorum:
		n := 0
		for _, rf := range rs.dcs {
			n += rf/2 + 1
		}
		if l < 0 {
			return n, 0
		}
		return n, l/2 + 1
	}
	return 0, 0
}

// overlap reports whether a read at r is guaranteed to reach a replica that
// acknowledged a write at w: R + W > RF, counted in the whole cluster or in
// the local data centre.
func (rs replicaSet) overlap(r, w gocql.Consistency, localDC string) bool {
	rt, rl := rs.acked(r, localDC)
	wt, wl := rs.acked(w, localDC)
	if rt+wt > rs.total() {
		return true
	}
	l := rs.localRF(localDC)
	return l > 0 && rl+wl > l
}

// confirmLevel is the cheapest read level guaranteed to see a write at w,
// used to tell a stale replica from lost data; false when none is (a write
// at ANY may live only in a hint).
func (rs replicaSet) confirmLevel(w gocql.Consistency, localDC string) (gocql.Consistency, bool) {
	for _, c := range []gocql.Consistency{gocql.LocalQuorum, gocql.Quorum, gocql.All} {
		if rs.overlap(c, w, localDC) {
			return c, true
		}
	}
	return 0, false
}

// writeOp and readOp are the ops whose levels must overlap for a strict check.
func (c *Config) writeOp() string {
	if c.Profile == ProfileYCSBA {
		return OpUpdate
	}
	return OpInsert
}

// weakWarning says why reads at the configured levels may miss writes, or
// is empty when they cannot.
func (c *Config) weakWarning(rs replicaSet) string {
	r, w := c.consistency(OpRead), c.consistency(c.writeOp())
	if rs.overlap(r, w, c.LocalDC) {
		return ""
	}
	fix := "Use LOCAL_QUORUM for both (the default) for a strict check"
	if rs.localRF(c.LocalDC) < 0 {
		fix = "Set local_dc (LOCAL_* levels count in the coordinator's data centre, which may differ per request without it) and use LOCAL_QUORUM for both for a strict check"
	}
	return fmt.Sprintf("consistency: %s at %s and %s at %s do not overlap with %s (R + W <= RF): a read may reach a replica a write has not reached yet. "+
		"Such a read is reported with cause stale (not data loss); not_found or mismatch only when a read at a level that overlaps the write confirms it. %s",
		c.writeOp(), w, OpRead, r, rs, fix)
}

// Warnings implements probes.Warner: settings that are valid but make the
// canary check less than an operator may expect.
func (c *Config) Warnings() []string {
	if w := c.weakWarning(c.Replication.configured()); w != "" {
		return []string{w}
	}
	return nil
}
