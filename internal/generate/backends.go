package generate

// Backend is one probe type as the rules and boards see it: its ops, and the
// phases some ops record. A new backend adds a row here (and figures to the
// baseline file); its overview row, board and per-op rules follow.
type Backend struct {
	Name  string
	Title string
	Ops   []Op
}

// Op is one canary op of a backend.
type Op struct {
	Name   string
	Phases []string
}

// S3 object sizes of the reference benchmark (4 KB, 128 KB, 1 MB, 8 MB),
// named as the S3 probe names its ops.
var s3Sizes = []string{"4KiB", "128KiB", "1MiB", "8MiB"}

// Backends lists every backend dbcanary probes (noop, the engine-overhead probe, has no board).
var Backends = []Backend{
	{Name: "cassandra", Title: "Cassandra", Ops: ops("insert", "read", "read_miss", "update", "ledger_write", "ledger_check")},
	{Name: "opensearch", Title: "OpenSearch", Ops: ops("index", "bulk", "search_default", "search_term", "search_phrase", "get", "visibility", "ledger_write", "ledger_check")},
	{Name: "rabbitmq", Title: "RabbitMQ", Ops: ops("publish", "consume", "ledger_write", "ledger_check")},
	{Name: "s3", Title: "S3", Ops: s3Ops()},
}

func ops(names ...string) []Op {
	out := make([]Op, len(names))
	for i, n := range names {
		out[i] = Op{Name: n}
	}
	return out
}

func s3Ops() []Op {
	var out []Op
	for _, verb := range []string{"put", "get", "head", "delete"} {
		for _, size := range s3Sizes {
			op := Op{Name: verb + "_" + size}
			if verb == "get" {
				op.Phases = []string{"first_byte", "last_byte"}
			}
			out = append(out, op)
		}
	}
	return append(out, Op{Name: "list"}, Op{Name: "ledger_write"}, Op{Name: "ledger_check"})
}

// backendByName finds a backend row.
func backendByName(name string) (Backend, bool) {
	for _, b := range Backends {
		if b.Name == name {
			return b, true
		}
	}
	return Backend{}, false
}

// hasOp reports whether the backend has the op (and phase, when not empty).
func (b Backend) hasOp(op, phase string) bool {
	for _, o := range b.Ops {
		if o.Name != op {
			continue
		}
		if phase == "" {
			return true
		}
		for _, p := range o.Phases {
			if p == phase {
				return true
			}
		}
	}
	return false
}
