// Package secrets proves that credentials never leave dbcanary: every secret
// (RabbitMQ, Cassandra and OpenSearch passwords, the S3 access key id and
// secret key, from files and from environment variables) gets a unique marker
// value, every failure path is driven (wrong passwords against the real
// servers, closed ports, TLS failures, rejected reloads, dump-config, once,
// debug logging), and no marker may appear in any output, log line, error,
// HTTP response or metric. The tests need the local stack: run them with
// -tags integration.
package secrets
