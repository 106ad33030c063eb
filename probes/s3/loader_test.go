package s3

import (
	"strings"
	"testing"

	"github.com/dbcanary/dbcanary/internal/config"
)

// TestConfigLoader goes through the real loader: strict decoding of the s3
// section, size parsing, field paths in errors, and op globs.
func TestConfigLoader(t *testing.T) {
	cfg, err := config.Parse([]byte(`
global: {instance_id: a-1}
targets:
  - name: store
    backend: s3
    ops:
      "get_*": {rate: 0.5}
      put_4KiB: {}
    s3:
      endpoint: http://127.0.0.1:9000
      sizes: [4KiB, 1MiB]
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range cfg.Targets[0].Resolved {
		got = append(got, op.Name)
		if strings.HasPrefix(op.Name, "get_") && op.Rate != 0.5 || op.Name == "put_4KiB" && op.Rate != defaultObjectRate {
			t.Errorf("%s rate %g", op.Name, op.Rate)
		}
	}
	if strings.Join(got, ",") != "get_1MiB,get_4KiB,put_4KiB" {
		t.Errorf("resolved ops %v", got)
	}

	_, err = config.Parse([]byte(`
global: {instance_id: a-1}
targets:
  - name: store
    backend: s3
    ops:
      get_2KiB: {}
    s3:
      endpoint: http://127.0.0.1:9000
      bukket: x
      sizes: [4KB]
`))
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"targets[0].s3.bukket", `"bucket"`, "targets[0].s3.sizes[0]", `"4KB" is not a size`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not contain %q:\n%v", want, err)
		}
	}
}
