// Package all registers every probe backend; the command imports it.
// A new backend adds one import line here.
package all

import (
	_ "github.com/dbcanary/dbcanary/probes/cassandra"  // cassandra: CQL
	_ "github.com/dbcanary/dbcanary/probes/noop"       // noop: engine overhead
	_ "github.com/dbcanary/dbcanary/probes/opensearch" // opensearch: REST
	_ "github.com/dbcanary/dbcanary/probes/rabbitmq"   // rabbitmq: AMQP 0-9-1
	_ "github.com/dbcanary/dbcanary/probes/s3"         // s3: S3-compatible object storage
)
