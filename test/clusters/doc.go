// Package clusters holds the node-fault tests of issue 21 on real 3-node
// clusters started by test/stack/*-cluster.sh (docs/clusters.md): a node
// killed with SIGKILL, a node slowed through toxiproxy, a second node down,
// both back, and the durability ledger through node loss, each driving the
// real dbcanary daemon and evaluating the generated alert rules on a real
// Prometheus.
//
// The tests carry the build tag integration and run only with
// DBCANARY_CLUSTERS=1 (`make test-compat-clusters`, part of make test-compat):
// without it the package runs no test and says so, so that the integration
// run of make test, which finds every package with an integration tag, passes
// over it (a cluster and its faults take minutes make test has no room for).
//
//	DBCANARY_CLUSTERS=1 go test -tags integration -count=1 -v ./test/clusters/
package clusters
