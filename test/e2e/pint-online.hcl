# Appended to the committed .pint.hcl by the end-to-end test (TestAlertsEndToEnd,
# subtest "pint online"): the Prometheus that test starts, which scrapes a
# real dbcanary probing every backend, so pint's checks that query a
# Prometheus run too (promql/series, promql/vector_matching, promql/counter,
# promql/rate, promql/range_query, labels/conflict, alerts/external_labels,
# rule/duplicate).
prometheus "e2e" {
  uri      = "${ENV_DBCANARY_PINT_PROMETHEUS_URL}"
  required = true
  timeout  = "30s"
}
