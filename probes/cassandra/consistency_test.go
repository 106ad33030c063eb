package cassandra

import (
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestOverlap(t *testing.T) {
	simple := func(rf int) replicaSet { return replicaSet{simple: true, dcs: map[string]int{"": rf}} }
	nts := func(dcs map[string]int) replicaSet { return replicaSet{dcs: dcs} }
	two := nts(map[string]int{"dc1": 3, "dc2": 3})
	cases := []struct {
		name    string
		rs      replicaSet
		r, w    gocql.Consistency
		localDC string
		want    bool
	}{
		{"defaults rf3", simple(3), gocql.LocalQuorum, gocql.LocalQuorum, "", true},
		{"defaults rf1", simple(1), gocql.LocalQuorum, gocql.LocalQuorum, "", true},
		{"defaults rf5", simple(5), gocql.LocalQuorum, gocql.LocalQuorum, "", true},
		{"one/one rf3", simple(3), gocql.One, gocql.One, "", false},
		{"one/one rf1", simple(1), gocql.One, gocql.One, "", true},
		{"one/one rf2", simple(2), gocql.One, gocql.One, "", false},
		{"one/all rf3", simple(3), gocql.One, gocql.All, "", true},
		{"all/one rf3", simple(3), gocql.All, gocql.One, "", true},
		{"quorum/one rf3", simple(3), gocql.Quorum, gocql.One, "", false},
		{"two/two rf3", simple(3), gocql.Two, gocql.Two, "", true},
		{"one/any rf1", simple(1), gocql.One, gocql.Any, "", false},
		{"all/any rf3", simple(3), gocql.All, gocql.Any, "", false},
		{"local quorum, local dc set", two, gocql.LocalQuorum, gocql.LocalQuorum, "dc1", true},
		{"local quorum, no local dc", two, gocql.LocalQuorum, gocql.LocalQuorum, "", false},
		{"local one/local quorum", two, gocql.LocalOne, gocql.LocalQuorum, "dc1", false},
		{"quorum/quorum two dcs", two, gocql.Quorum, gocql.Quorum, "", true},
		{"local quorum/each quorum", two, gocql.LocalQuorum, gocql.EachQuorum, "dc1", true},
		{"one/quorum two dcs", two, gocql.One, gocql.Quorum, "", false},
		{"one dc of two has no replica here", nts(map[string]int{"dc1": 1, "dc2": 1}), gocql.One, gocql.LocalOne, "dc1", false},
		{"single nts dc", nts(map[string]int{"dc1": 3}), gocql.LocalQuorum, gocql.LocalQuorum, "", true},
	}
	for _, tc := range cases {
		if got := tc.rs.overlap(tc.r, tc.w, tc.localDC); got != tc.want {
			t.Errorf("%s: overlap(%s, %s, %s, local_dc %q) = %v, want %v", tc.name, tc.r, tc.w, tc.rs, tc.localDC, got, tc.want)
		}
	}
}

func TestConfirmLevel(t *testing.T) {
	rs := replicaSet{dcs: map[string]int{"dc1": 1, "dc2": 1}}
	if cl, ok := rs.confirmLevel(gocql.LocalOne, "dc1"); !ok || cl != gocql.LocalQuorum {
		t.Errorf("LOCAL_ONE write in dc1: confirm at %v %v, want LOCAL_QUORUM", cl, ok)
	}
	if cl, ok := (replicaSet{simple: true, dcs: map[string]int{"": 3}}).confirmLevel(gocql.One, ""); !ok || cl != gocql.All {
		t.Errorf("ONE write, rf 3: confirm at %v %v, want ALL", cl, ok)
	}
	if _, ok := (replicaSet{simple: true, dcs: map[string]int{"": 3}}).confirmLevel(gocql.Any, ""); ok {
		t.Error("a write at ANY cannot be confirmed by any read")
	}
}

func TestParseReplication(t *testing.T) {
	rs, ok := parseReplication(map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "3"})
	if !ok || !rs.equal(replicaSet{simple: true, dcs: map[string]int{"": 3}}) {
		t.Errorf("simple: %v %v", rs, ok)
	}
	rs, ok = parseReplication(map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "3/1"})
	if !ok || rs.String() != "NetworkTopologyStrategy {dc1: 3, dc2: 3}" {
		t.Errorf("nts: %v %v", rs, ok)
	}
	if _, ok := parseReplication(map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"}); ok {
		t.Error("LocalStrategy modelled")
	}
}

func TestWarnings(t *testing.T) {
	c := validConfig()
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("defaults warn: %v", w)
	}
	c.Consistency = map[string]string{"insert": "ONE", "read": "one"}
	w := c.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], "insert at ONE and read at ONE do not overlap with SimpleStrategy, replication factor 3 (R + W <= RF)") {
		t.Errorf("ONE/ONE with rf 3: %v", w)
	}
	c.Replication = Replication{Class: "NetworkTopologyStrategy", Datacenters: map[string]int{"dc1": 3, "dc2": 3}}
	c.Consistency = nil
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "Set local_dc") {
		t.Errorf("two data centres without local_dc: %v", w)
	}
	c.LocalDC = "dc1"
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("two data centres with local_dc: %v", w)
	}
	y := validConfig()
	y.Profile = ProfileYCSBA
	y.Consistency = map[string]string{"update": "ONE", "read": "QUORUM"}
	if w := y.Warnings(); len(w) != 1 || !strings.Contains(w[0], "update at ONE and read at QUORUM") {
		t.Errorf("ycsb ONE/QUORUM with rf 3: %v", w)
	}
}
