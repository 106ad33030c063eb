# pint (github.com/cloudflare/pint v0.60.0) configuration for the generated
# rules in alerts/dbcanary-rules.yml. Run by `make lint-rules-boards` through
# test/tools/pint.sh (offline checks). Fix findings in internal/generate and
# regenerate (`make generate`); never by editing the generated file.

# Every alert pages or tickets someone: it says how bad, what, and where to look.
rule {
  match {
    kind = "alerting"
  }
  label "severity" {
    severity = "bug"
    required = true
    value    = "(critical|warning)"
    comment  = "Alertmanager routes on severity: critical pages, warning tickets (alerts/alertmanager.yml)."
  }
  annotation "summary" {
    severity = "bug"
    required = true
  }
  annotation "description" {
    severity = "bug"
    required = true
  }
  annotation "runbook_url" {
    severity = "bug"
    required = true
    value    = "https://github\\.com/dbcanary/dbcanary/blob/main/docs/runbooks\\.md#[a-z0-9-]+"
    comment  = "Every alert links its section of docs/runbooks.md."
  }
}

# Recording rules named target* keep the target and backend labels: the alerts
# and boards join and filter on them.
rule {
  match {
    kind = "recording"
  }
  aggregate "target.*:.+" {
    severity = "bug"
    keep     = ["target", "backend"]
  }
  aggregate "backend.*:.+" {
    severity = "bug"
    keep     = ["backend"]
  }
}

checks {
  disabled = [
    # rule/link fetches every URL in annotations (our runbook links on
    # github.com): lint runs offline, and traffic goes only to 127.0.0.1. The
    # runbook_url pattern above and the generator's tests (each anchor exists
    # in docs/runbooks.md) cover the same ground locally.
    "rule/link",
  ]
}
