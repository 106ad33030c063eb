// Package cassandra is the Cassandra canary: it runs the cassandra-stress
// mixed_workload profile or YCSB workload A at a low rate inside a keyspace of
// its own, reads back only rows this instance wrote recently and compares
// every byte. Rows carry a TTL, so the canary's footprint stays bounded.
package cassandra
