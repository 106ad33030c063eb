// Package all registers every probe backend; the command imports it.
// A new backend adds one import line here.
package all

import (
	_ "github.com/dbcanary/dbcanary/probes/noop"     // noop: engine overhead
	_ "github.com/dbcanary/dbcanary/probes/rabbitmq" // rabbitmq: AMQP 0-9-1
)
