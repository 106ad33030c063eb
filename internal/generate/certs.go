package generate

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/dbcanary/dbcanary/internal/baseline"
)

// certExpiryMetric is the gauge the engine exports for targets that speak TLS
// (internal/engine/certs.go): the earliest notAfter over every certificate
// the store's nodes presented.
const certExpiryMetric = "dbcanary_tls_earliest_cert_expiry_timestamp_seconds"

// certRules are the TLS certificate expiry alerts: a ticket within
// policy.cert_expiry_warning, a page within policy.cert_expiry_critical (or
// once expired). Each severity has its own band, so one certificate is a
// ticket or a page, never both.
func certRules(p baseline.Policy, opt Options) []Rule {
	warn, crit := p.CertExpiry()
	left := "(" + certExpiryMetric + " - time())"
	rule := func(sev, expr, summary, desc string) Rule {
		return Rule{Alert: AlertTLSCertExpiring, Expr: expr, For: opt.forOf(AlertTLSCertExpiring, sev, 15*time.Minute),
			Labels:      map[string]string{"severity": sev},
			Annotations: map[string]string{"summary": summary, "description": desc, "runbook_url": opt.runbook(AlertTLSCertExpiring)},
			// The gauge exists only for TLS targets: a Prometheus that
			// scrapes plaintext stores only has none, which pint's online
			// series check would report as a broken rule.
			Comment: "pint disable promql/series(" + certExpiryMetric + ")"}
	}
	return []Rule{
		rule("warning", fmt.Sprintf(`%[1]s < %[2]s and %[1]s >= %[3]s`, left, qs(warn.Seconds()), qs(crit.Seconds())),
			"A TLS certificate of {{ $labels.backend }} target {{ $labels.target }} expires soon",
			fmt.Sprintf("The first certificate the store presents to dbcanary expires in {{ $value | humanizeDuration }} (policy.cert_expiry_warning: %s): renew it; the status page (/) names its subject.", model.Duration(warn))),
		rule("critical", fmt.Sprintf(`%s < %s`, left, qs(crit.Seconds())),
			"A TLS certificate of {{ $labels.backend }} target {{ $labels.target }} expires within days",
			fmt.Sprintf("The first certificate the store presents to dbcanary expires in {{ $value | humanizeDuration }} (negative: it has expired; policy.cert_expiry_critical: %s): clients will refuse the store. Renew it now; the status page (/) names its subject.", model.Duration(crit))),
	}
}

// node encodes the rule file as a YAML node tree with each rule's Comment
// above it, where pint and other linters read their directives.
func (f *RuleFile) node() any {
	var n yaml.Node
	if err := n.Encode(f); err != nil {
		return f // Encode reports the same error again to the caller
	}
	groups := mapValue(&n, "groups")
	if groups == nil || len(groups.Content) != len(f.Groups) {
		return f
	}
	for gi, g := range f.Groups {
		rules := mapValue(groups.Content[gi], "rules")
		if rules == nil || len(rules.Content) != len(g.Rules) {
			continue
		}
		for ri, r := range g.Rules {
			if r.Comment != "" {
				rules.Content[ri].HeadComment = "# " + r.Comment
			}
		}
	}
	return &n
}

// mapValue is the value of key in mapping node n (or in the document n wraps).
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
