// Package statuspage tests the status page in a real headless Chromium: the
// dbcanary binary probes the real local stack (a RabbitMQ broker of the
// test's own, stopped halfway, and the shared Cassandra, OpenSearch and
// MinIO, only probed), and the rendered page must show the stopped target
// failing with its cause and message, the others ok, and no secret from the
// config; also behind --web.config.file basic auth. Screenshots are kept as
// test artefacts. Run with -tags integration (test/tools/chromium.sh installs
// Debian's chromium).
package statuspage
