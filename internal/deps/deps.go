//go:build tools

// Package deps pins modules that packages under construction will import, so
// that go.mod does not churn while they land. It is never built.
package deps

import (
	_ "github.com/Shopify/toxiproxy/v2/client"
	_ "github.com/apache/cassandra-gocql-driver/v2"
	_ "github.com/minio/minio-go/v7"
	_ "github.com/opensearch-project/opensearch-go/v4"
	_ "github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	_ "go.uber.org/goleak"
)
