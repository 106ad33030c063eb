package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dbcanary/dbcanary/probes"
	"github.com/dbcanary/dbcanary/probes/noop"
	_ "github.com/dbcanary/dbcanary/probes/rabbitmq"
)

func TestGoodConfig(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Global.InstanceID; got != "test-1" {
		t.Errorf("instance id = %q", got)
	}
	if len(cfg.Targets) != 2 {
		t.Fatalf("targets = %d", len(cfg.Targets))
	}
	mq := cfg.Targets[0]
	if mq.Timeout != 3*time.Second || mq.MaxInFlight != 4 {
		t.Errorf("global defaults not applied: timeout %s, max_in_flight %d", mq.Timeout, mq.MaxInFlight)
	}
	if len(mq.Resolved) != 2 || mq.Resolved[0].Name != "consume" || !mq.Resolved[0].Async ||
		mq.Resolved[1].Name != "publish" || mq.Resolved[1].Rate != 0.2 || mq.Resolved[1].Timeout != 2*time.Second {
		t.Errorf("resolved ops = %+v", mq.Resolved)
	}
	// No ops map: every op at its default rate.
	ov := cfg.Targets[1]
	if len(ov.Resolved) != 1 || ov.Resolved[0].Rate != 1 {
		t.Errorf("noop ops = %+v", ov.Resolved)
	}
	if d := ov.Probe.(*noop.Config).Delay; d != time.Millisecond {
		t.Errorf("noop delay = %s", d)
	}
}

func TestDumpHasDefaultsAndNoSecret(t *testing.T) {
	cfg, err := LoadFile("testdata/good.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Dump(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"queue_expires: 30m0s", "max_length: 1000", "password_file: testdata/password", "rate: 0.2", "timeout: 5s"} {
		if !strings.Contains(s, want) {
			t.Errorf("dump lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "guest-secret") {
		t.Error("dump contains the secret value")
	}
	// The dump is itself a valid config.
	if _, err := Parse(out); err != nil {
		t.Errorf("dump does not parse back: %v", err)
	}
}

const mq = `
  - name: mq
    backend: rabbitmq
    rabbitmq:
      url: amqp://127.0.0.1:5672/
      password_file: testdata/password
`

// TestBadConfigs asserts the exact message for each kind of mistake: the path
// (and line, for YAML-level problems) is what an operator needs to fix it.
func TestBadConfigs(t *testing.T) {
	os.Unsetenv("DBCANARY_TEST_UNSET_VAR")
	known := strings.Join(probes.Names(), ", ") // backends this test binary registered
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"not yaml", "targets: [", []string{"config is not valid YAML: line 1: did not find expected node content"}},
		{"empty", "", []string{"config is empty: it needs a targets list"}},
		{"unknown top-level key", "target: []\n", []string{
			`target: line 1: unknown field "target" (did you mean "targets"?)`,
			"targets: missing: list at least one target"}},
		{"unknown global key", "global:\n  timeot: 1s\ntargets: []\n", []string{
			`global.timeot: line 2: unknown field "timeot" (did you mean "timeout"?)`}},
		{"bad duration", "global:\n  timeout: fast\ntargets: []\n", []string{
			"global.timeout: line 2: cannot unmarshal !!str `fast` into time.Duration"}},
		{"negative in-flight", "global:\n  max_in_flight: 0\ntargets: []\n", []string{
			"global.max_in_flight: must be at least 1, got 0"}},
		{"bad instance id", "global:\n  instance_id: Pod_1\ntargets: []\n", []string{
			`global.instance_id: "Pod_1" must be 1-40 lowercase letters, digits or '-', starting with a letter or digit`}},
		{"targets not a list", "targets: {a: 1}\n", []string{"targets: line 1: expected a list, got a mapping"}},
		{"missing name and backend", "targets:\n  - ops: {}\n", []string{
			"targets[0].name: missing: every target needs a unique name",
			"targets[0].backend: missing: one of " + known}},
		{"unknown backend", "targets:\n  - name: x\n    backend: redis\n", []string{
			`targets[0].backend: unknown backend "redis" (known: ` + known + ")"}},
		{"bad target name", "targets:\n  - name: My Queue\n    backend: noop\n", []string{
			`targets[0].name: "My Queue" must be 1-63 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit (it becomes part of queue, index and key names)`}},
		{"duplicate names", "targets:\n  - name: a\n    backend: noop\n  - name: a\n    backend: noop\n", []string{
			`targets[1].name: "a" is already used by targets[0]`}},
		{"unknown key in backend section", "targets:" + mq + "      passwd: x\n", []string{
			`targets[0].rabbitmq.passwd: line 7: unknown field "passwd" (known: connect_timeout, heartbeat, ledger, loss_timeout, max_length, message_size, node_check_interval, password_env, password_file, queue_expires, queue_prefix, queue_type, tls, url, urls, username)`}},
		{"misspelt key in backend section", "targets:" + mq + "      max_lenght: 5\n", []string{
			`targets[0].rabbitmq.max_lenght: line 7: unknown field "max_lenght" (did you mean "max_length"?)`}},
		{"wrong type in backend section", "targets:" + mq + "      max_length: lots\n", []string{
			"targets[0].rabbitmq.max_length: line 7: cannot unmarshal !!str `lots` into int"}},
		{"section for another backend", "targets:\n  - name: x\n    backend: noop\n    rabbitmq: {}\n", []string{
			`targets[0].rabbitmq: line 4: section does not match backend "noop"`}},
		{"password in URL", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: amqp://u:hunter2@127.0.0.1/\n      password_file: testdata/password\n", []string{
			"targets[2].rabbitmq.url: must not contain a password: use password_file or password_env"}},
		{"no password", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: amqp://127.0.0.1/\n", []string{
			"targets[0].rabbitmq.password_file: a secret is required: set password_file or password_env"}},
		{"missing password file", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: amqp://127.0.0.1/\n      password_file: /nonexistent/pw\n", []string{
			"targets[0].rabbitmq.password_file: cannot read secret file: open /nonexistent/pw: no such file or directory"}},
		{"unset password env", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: amqp://127.0.0.1/\n      password_env: DBCANARY_TEST_UNSET_VAR\n", []string{
			"targets[0].rabbitmq.password_env: environment variable DBCANARY_TEST_UNSET_VAR is not set"}},
		{"bad url scheme", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: http://127.0.0.1/\n      password_file: testdata/password\n", []string{
			"targets[0].rabbitmq.url: AMQP scheme must be either 'amqp://' or 'amqps://'"}},
		{"bad queue type", "targets:" + mq + "      queue_type: stream\n", []string{
			`targets[0].rabbitmq.queue_type: must be classic or quorum, got "stream"`}},
		{"unknown op", "targets:\n  - name: x\n    backend: noop\n    ops:\n      nop: {rate: 1}\n", []string{
			`targets[0].ops.nop: unknown op "nop" for backend noop (did you mean "noop"?)`}},
		{"rate out of range", "targets:\n  - name: x\n    backend: noop\n    ops:\n      noop: {rate: -1}\n", []string{
			"targets[0].ops.noop.rate: must be between 0 and 10000 ops/s, got -1"}},
		{"rate on event-driven op", "targets:" + mq + "    ops:\n      consume: {rate: 1}\n", []string{
			"targets[0].ops.consume.rate: consume is event-driven (one sample per event) and takes no rate"}},
		{"all ops off", "targets:\n  - name: x\n    backend: noop\n    ops:\n      noop: {rate: 0}\n", []string{
			"targets[0].ops: no op is enabled (known: noop)"}},
		{"reserved label", "targets:\n  - name: x\n    backend: noop\n    labels: {op: a, 0bad: b}\n", []string{
			"targets[0].labels.0bad: not a valid Prometheus label name",
			"targets[0].labels.op: reserved label name (dbcanary sets it)"}},
		{"duplicate key", "targets:\n  - name: x\n    name: y\n    backend: noop\n", []string{
			"targets[0].name: line 3: duplicate key (first set on line 2)"}},
		{"noop failure ratio", "targets:\n  - name: x\n    backend: noop\n    noop: {failure_ratio: 2}\n", []string{
			"targets[0].noop.failure_ratio: must be between 0 and 1, got 2"}},
		{"NaN failure ratio", "targets:\n  - name: x\n    backend: noop\n    noop: {failure_ratio: .nan}\n", []string{
			"targets[0].noop.failure_ratio: must be between 0 and 1, got NaN"}},
		{"two YAML documents", "targets: []\n---\ntargets: []\n", []string{
			"line 2: the config holds more than one YAML document (a second one starts here): merge them into one"}},
		{"null target", "targets:\n  -\n", []string{
			`targets[0]: line 2: expected a mapping, got ""`}},
		{"port out of range", "targets:\n  - name: mq\n    backend: rabbitmq\n    rabbitmq:\n      url: amqp://127.0.0.1:99999/\n      password_file: testdata/password\n", []string{
			"targets[0].rabbitmq.url: port must be between 1 and 65535, got 99999"}},
	}
	// The "password in URL" case is the third target so the index in the path is checked.
	cases[16].yaml = "targets:\n  - name: a\n    backend: noop\n  - name: b\n    backend: noop\n" + strings.TrimPrefix(cases[16].yaml, "targets:\n")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatal("config accepted")
			}
			j, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("error is %T, not joined: %v", err, err)
			}
			errs := j.Unwrap()
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("errors:\n got: %q\nwant: %q", got, c.want)
			}
		})
	}
}

func TestGlobOps(t *testing.T) {
	cfg, err := Parse([]byte("targets:\n  - name: x\n    backend: noop\n    ops:\n      'n*': {rate: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ops := cfg.Targets[0].Resolved; len(ops) != 1 || ops[0].Rate != 3 {
		t.Errorf("ops = %+v", ops)
	}
}

func TestDefaultInstanceID(t *testing.T) {
	t.Setenv("DBCANARY_INSTANCE_ID", "App-Pod_7f9c.zone-A")
	if got := DefaultInstanceID(); got != "app-pod-7f9c-zone-a" {
		t.Errorf("got %q", got)
	}
	t.Setenv("DBCANARY_INSTANCE_ID", strings.Repeat("x", 50)+"-tail")
	if got := DefaultInstanceID(); len(got) > 40 || !instanceRE.MatchString(got) {
		t.Errorf("got %q", got)
	}
}
