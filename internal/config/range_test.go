package config

import (
	"fmt"
	"strings"
	"testing"
)

// TestOutOfRangeNumbers sets each numeric key of each backend to zero, a
// negative and a huge value. Parse must name the key in its error, never panic
// and never hang: the ops list (with its payload estimates) is built from a
// config before Validate's verdict is known, which is how FuzzParse found
// opensearch body_words: 0 panicking in the payload estimate (CI, 26 Nov).
func TestOutOfRangeNumbers(t *testing.T) {
	bases := map[string]string{
		"cassandra": `hosts: [127.0.0.1]
      mixed_workload: {a_size: {min: 1, max: 100}, b_size: {min: 5, max: 50}, recent_keys: 10}`,
		"cassandra-ycsb": `hosts: [127.0.0.1]
      profile: ycsb_a`,
		"opensearch": `addresses: [http://127.0.0.1:9200]`,
		"rabbitmq":   `url: amqp://127.0.0.1:5672/`,
		"s3": `endpoint: http://127.0.0.1:9000
      bucket: b
      access_key_id_env: HOME
      secret_access_key_env: HOME`,
	}
	keys := map[string][]string{
		"cassandra":      {"port", "mixed_workload: {a_size: {min: %s, max: 10}}", "mixed_workload: {a_size: {min: 1, max: %s}}", "mixed_workload: {b_size: {min: 1, max: %s}}", "mixed_workload: {recent_keys: %s}"},
		"cassandra-ycsb": {"ycsb_a: {record_count: %s, field_length: 10}", "ycsb_a: {record_count: 10, field_length: %s}"},
		"opensearch":     {"body_words", "bulk_size", "replicas", "max_retries"},
		"rabbitmq":       {"message_size"},
		"s3":             {"sizes: [%s]", "max_objects_per_size"},
	}
	for base, ks := range keys {
		backend, _, _ := strings.Cut(base, "-")
		for _, k := range ks {
			for _, v := range []string{"0", "-1", "1000000000000"} {
				line := k + ": %s"
				if strings.Contains(k, "%s") {
					line = k
				}
				field, _, _ := strings.Cut(k, ":")
				doc := fmt.Sprintf(`targets:
  - name: t
    backend: %s
    %s:
      %s
      %s
`, backend, backend, bases[base], fmt.Sprintf(line, v))
				t.Run(base+"/"+field+"="+v, func(t *testing.T) {
					_, err := Parse([]byte(doc))
					if err == nil {
						if v == "1000000000000" || (v == "0" && field == "replicas") || (v == "0" && field == "max_retries") {
							return // an upper bound is not every key's business; zero replicas/retries are valid
						}
						t.Fatalf("accepted:\n%s", doc)
					}
					if !strings.Contains(err.Error(), field) {
						t.Errorf("error does not name %q: %v\n%s", field, err, doc)
					}
				})
			}
		}
	}
}
