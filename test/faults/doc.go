// Package faults holds dbcanary's fault-injection and outage tests: a real
// engine probes each real server (RabbitMQ, Cassandra, OpenSearch, MinIO)
// through a Toxiproxy TCP proxy, faults are injected (latency, stall,
// blackhole, reset, cut, bandwidth, slicer) or the server is stopped and
// started again, and the tests assert and print what the metrics did.
// The tests carry the integration build tag; see the README (Failure semantics).
package faults
