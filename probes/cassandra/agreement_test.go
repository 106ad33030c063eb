package cassandra

import (
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/dbcanary/dbcanary/probes"
)

func uuid(t *testing.T, s string) gocql.UUID {
	t.Helper()
	u, err := gocql.ParseUUID(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestJudge: the table is agreed only when every node that answered has it
// under one id and the schema versions (the nodes' own, and their peers' as
// gossiped, except peers the driver knows are down) are one.
func TestJudge(t *testing.T) {
	idA := uuid(t, "7d699310-e95c-11f1-ac5c-bb1ecce95939")
	idB := uuid(t, "7d68a8b0-e95c-11f1-89bf-c5ee9cc63172")
	const v1, v2 = "c2f2af5e-6431-31ae-98d7-e53e8aeaf5fd", "b2e97d35-6a07-356d-a858-7f13e4847073"
	node := func(addr, hostID string, id gocql.UUID, version string, peers ...peerVersion) nodeView {
		return nodeView{addr: addr, hostID: hostID, found: id != gocql.UUID{}, id: id, version: version, peers: peers}
	}
	peer := func(hostID, version string) peerVersion {
		return peerVersion{hostID: hostID, addr: "127.0.0." + hostID, version: version}
	}
	for _, tc := range []struct {
		name  string
		views []nodeView
		down  map[string]bool
		want  verdict // agreed, idSplit, versionSplit compared; id when agreed
		words []string
	}{
		{"one node", []nodeView{node("n1", "1", idA, v1)}, nil, verdict{agreed: true, id: idA}, nil},
		{"three nodes, one id, one version", []nodeView{
			node("n1", "1", idA, v1, peer("2", v1), peer("3", v1)),
			node("n2", "2", idA, v1, peer("1", v1), peer("3", v1)),
			node("n3", "3", idA, v1, peer("1", v1), peer("2", v1)),
		}, nil, verdict{agreed: true, id: idA}, nil},
		{"two ids (the race)", []nodeView{
			node("n1", "1", idB, v2), node("n2", "2", idA, v1), node("n3", "3", idA, v1),
		}, nil, verdict{idSplit: true}, []string{"2 table ids", idA.String() + " on n2, n3", idB.String() + " on n1"}},
		{"a node without the table yet", []nodeView{
			node("n1", "1", idA, v1), node("n2", "2", gocql.UUID{}, v2),
		}, nil, verdict{idSplit: true}, []string{"no such table yet on n2"}},
		{"a node that does not answer is not counted", []nodeView{
			node("n1", "1", idA, v1), {addr: "n2", hostID: "2", err: gocql.ErrNoConnections},
		}, nil, verdict{agreed: true, id: idA}, nil},
		{"pinned: one node asked, a peer's gossiped version differs", []nodeView{
			node("n1", "1", idA, v1, peer("2", v1), peer("3", v2)),
		}, nil, verdict{versionSplit: true}, []string{"n1 says schema version " + v1, "peer 127.0.0.3 (host id 3) " + v2}},
		{"a peer known down is not waited for", []nodeView{
			node("n1", "1", idA, v1, peer("2", v1), peer("3", v2)),
			node("n2", "2", idA, v1, peer("1", v1), peer("3", v2)),
		}, map[string]bool{"3": true}, verdict{agreed: true, id: idA}, nil},
		{"a peer without a version yet is not waited for", []nodeView{
			node("n1", "1", idA, v1, peer("2", "")),
		}, nil, verdict{agreed: true, id: idA}, nil},
		{"two nodes, same id, different versions", []nodeView{
			node("n1", "1", idA, v1), node("n2", "2", idA, v2),
		}, nil, verdict{versionSplit: true}, []string{"n1 says schema version " + v1 + ", n2 " + v2}},
		{"nobody answered", []nodeView{{addr: "n1", err: gocql.ErrNoConnections}}, nil, verdict{}, []string{"no node answered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(tc.views, tc.down)
			if got.agreed != tc.want.agreed || got.idSplit != tc.want.idSplit || got.versionSplit != tc.want.versionSplit {
				t.Fatalf("judge = %+v, want agreed %v, idSplit %v, versionSplit %v", got, tc.want.agreed, tc.want.idSplit, tc.want.versionSplit)
			}
			if got.agreed && got.id != tc.want.id {
				t.Errorf("agreed on %s, want %s", got.id, tc.want.id)
			}
			for _, w := range tc.words {
				if !strings.Contains(got.detail, w) {
					t.Errorf("detail %q does not say %q", got.detail, w)
				}
			}
		})
	}
}

// TestDisagreementError: a table id disagreement is cause setup (held back,
// a misconfiguration page after its "for", never data loss) and its error
// names the table, the nodes and their ids, and the fix.
func TestDisagreementError(t *testing.T) {
	p := newTestProbe(t)
	idA := uuid(t, "7d699310-e95c-11f1-ac5c-bb1ecce95939")
	idB := uuid(t, "7d68a8b0-e95c-11f1-89bf-c5ee9cc63172")
	views := []nodeView{
		{addr: "127.0.0.11", found: true, id: idB}, {addr: "127.0.0.12", found: true, id: idA}, {addr: "127.0.0.13", found: true, id: idA},
	}
	err := p.disagreement(judge(views, nil), views)
	if c := probes.CauseOf(err); c != probes.CauseSetup || c.DataCause() {
		t.Errorf("cause %s, want setup", c)
	}
	for _, w := range []string{"schema disagreement", "dbcanary.mixed_workload", idA.String() + " on 127.0.0.12, 127.0.0.13", idB.String() + " on 127.0.0.11",
		"Writes are held back", "nodetool describecluster", "nodetool resetlocalschema", "DROP TABLE dbcanary.mixed_workload;"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	views = []nodeView{{addr: "127.0.0.11", found: true, id: idA, version: "v1", peers: []peerVersion{{hostID: "h3", addr: "127.0.0.3", version: "v2"}}}}
	err = p.disagreement(judge(views, nil), views)
	if c := probes.CauseOf(err); c != probes.CauseSetup {
		t.Errorf("version split: cause %s, want setup", c)
	}
	if !strings.Contains(err.Error(), "waiting for schema agreement") || !strings.Contains(err.Error(), "127.0.0.3 (host id h3) v2") {
		t.Errorf("version split: error %q", err)
	}
}

// TestAdoptTableID: the rows remembered are forgotten when the table's id
// changed since the last Prepare (they are not in the new table: reading them
// would be a false not_found), and kept when it is the same.
func TestAdoptTableID(t *testing.T) {
	p := newTestProbe(t)
	idA := uuid(t, "7d699310-e95c-11f1-ac5c-bb1ecce95939")
	idB := uuid(t, "7d68a8b0-e95c-11f1-89bf-c5ee9cc63172")
	key := func() written { k, _ := gocql.RandomUUID(); return written{key: k, aLen: 1, bLen: 1, at: time.Now()} }
	remembered := func() bool { _, ok := p.ring.pick(time.Now(), 0, time.Hour); return ok }

	p.adoptTableID(idA) // first Prepare: nothing to compare with
	p.ring.add(key())
	p.adoptTableID(idA) // the same table
	if !remembered() {
		t.Fatal("rows forgotten although the table id did not change")
	}
	p.adoptTableID(idB) // the table was replaced
	if remembered() {
		t.Fatal("rows written into the table of the old id are still remembered: their reads would be not_found")
	}
	if p.schema.tableID != idB {
		t.Errorf("table id %s, want %s", p.schema.tableID, idB)
	}
}

func newTestProbe(t *testing.T) *Probe {
	t.Helper()
	cfg := DefaultConfig
	cfg.Hosts = []string{"127.0.0.11"}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatal(errs)
	}
	p, err := New(probes.Target{Name: "t", InstanceID: "i", Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
