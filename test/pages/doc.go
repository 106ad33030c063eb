// Package pages is the page-quality suite: the real dbcanary daemon probes
// the whole local stack (Cassandra, OpenSearch, RabbitMQ, MinIO) through
// toxiproxy, a real Prometheus scrapes it and evaluates the generated rules
// (exactly as shipped, `for:` shortened only by generate.Options.For), and a
// real Alertmanager loaded from alerts/alertmanager.yml (receiver URLs pointed
// at a webhook in the test) routes, groups and inhibits. After a healthy
// period, every backend goes through a fault matrix (server stopped, latency
// x4, wrong credentials, setup error, canary data altered, short restart) and
// the suite prints which alerts fired, which should not have, and how many
// pages the pager receiver got. docs/evidence/page-quality.md keeps the latest table.
//
// The tests carry the integration build tag (TestPageQuality runs in
// `make test`); the 30-minute healthy soak also needs the soakpages tag
// (`make soak-pages`).
package pages
