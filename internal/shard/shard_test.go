package shard

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/dbcanary/dbcanary/internal/config"
)

const numTargets = 1000

func targetNames() []string {
	names := make([]string, numTargets)
	for i := range names {
		names[i] = fmt.Sprintf("target-%04d", i)
	}
	return names
}

func TestEveryTargetHasExactlyOneOwner(t *testing.T) {
	targets := make([]config.Target, numTargets)
	for i, n := range targetNames() {
		targets[i] = config.Target{Name: n}
	}
	for count := 1; count <= 10; count++ {
		owners := map[string]int{}
		for index := 0; index < count; index++ {
			for _, tg := range Select(targets, index, count) {
				owners[tg.Name]++
				if got := Owner(tg.Name, count); got != index {
					t.Fatalf("count %d: Select(index %d) returned %s, but Owner says %d", count, index, tg.Name, got)
				}
			}
		}
		if len(owners) != numTargets {
			t.Fatalf("count %d: %d of %d targets have an owner", count, len(owners), numTargets)
		}
		for name, n := range owners {
			if n != 1 {
				t.Fatalf("count %d: %s has %d owners", count, name, n)
			}
		}
	}
}

// TestBalance: each replica's share is within 5 binomial standard deviations
// of 1000/n (a fair hash fails this with probability ~1e-6 per replica).
func TestBalance(t *testing.T) {
	names := targetNames()
	for count := 2; count <= 10; count++ {
		load := make([]int, count)
		for _, n := range names {
			load[Owner(n, count)]++
		}
		p := 1 / float64(count)
		mean, sd := numTargets*p, math.Sqrt(numTargets*p*(1-p))
		for r, l := range load {
			if math.Abs(float64(l)-mean) > 5*sd {
				t.Errorf("count %d: replica %d owns %d targets, want %.0f ± %.0f", count, r, l, mean, 5*sd)
			}
		}
	}
}

// TestScaleUpMovesOnlyToNewReplica: from n to n+1 replicas, a target either
// stays or moves to the new replica n, and about 1/(n+1) of them move.
func TestScaleUpMovesOnlyToNewReplica(t *testing.T) {
	names := targetNames()
	for n := 1; n <= 9; n++ {
		moved := 0
		for _, name := range names {
			before, after := Owner(name, n), Owner(name, n+1)
			if before == after {
				continue
			}
			if after != n {
				t.Fatalf("%d->%d replicas: %s moved from %d to %d, not to the new replica %d", n, n+1, name, before, after, n)
			}
			moved++
		}
		p := 1 / float64(n+1)
		want, sd := numTargets*p, math.Sqrt(numTargets*p*(1-p))
		if math.Abs(float64(moved)-want) > 5*sd {
			t.Errorf("%d->%d replicas: %d targets moved, want %.0f ± %.0f", n, n+1, moved, want, 5*sd)
		}
		t.Logf("%d->%d replicas: %d of %d targets moved (ideal %.0f)", n, n+1, moved, numTargets, want)
	}
}

// TestDeterministic pins a few owners: a change here reshuffles every
// deployment's targets, which must be a deliberate, documented change.
func TestDeterministic(t *testing.T) {
	for _, name := range targetNames() {
		if a, b := Owner(name, 7), Owner(name, 7); a != b {
			t.Fatalf("Owner(%s, 7) returned %d then %d", name, a, b)
		}
	}
	pinned := []struct {
		target string
		count  int
		want   int
	}{
		{"rabbitmq-prod", 3, 0},
		{"cassandra-eu", 3, 1},
		{"s3-archive", 5, 2},
		{"opensearch-logs", 10, 4},
		{"target-0000", 2, 0},
		{"target-0999", 7, 3},
	}
	for _, p := range pinned {
		if got := Owner(p.target, p.count); got != p.want {
			t.Errorf("Owner(%q, %d) = %d, want %d", p.target, p.count, got, p.want)
		}
	}
}

func TestOwnerWithoutSharding(t *testing.T) {
	for _, count := range []int{-1, 0, 1} {
		if got := Owner("anything", count); got != 0 {
			t.Errorf("Owner(_, %d) = %d, want 0", count, got)
		}
	}
}

func TestSelectKeepsConfigOrder(t *testing.T) {
	var targets []config.Target
	for _, n := range targetNames()[:50] {
		targets = append(targets, config.Target{Name: n})
	}
	got := Select(targets, 1, 3)
	for i := 1; i < len(got); i++ {
		if got[i-1].Name >= got[i].Name {
			t.Fatalf("Select reordered targets: %s before %s", got[i-1].Name, got[i].Name)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		index, count int
		want         string
	}{
		{0, 1, ""},
		{2, 3, ""},
		{3, 3, "shard index 3 is outside [0, 3)"},
		{-1, 3, "shard index -1 is outside [0, 3)"},
		{0, 0, "shard count must be at least 1, got 0"},
	} {
		err := Validate(tc.index, tc.count)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Validate(%d, %d) = %q, want %q", tc.index, tc.count, got, tc.want)
		}
	}
}

func TestOrdinal(t *testing.T) {
	for _, tc := range []struct {
		host string
		want int
		ok   bool
	}{
		{"dbcanary-0", 0, true},
		{"dbcanary-shard-12", 12, true},
		{"dbcanary-3.dbcanary-headless.monitoring.svc.cluster.local", 3, true},
		{"dbcanary", 0, false},
		{"dbcanary-", 0, false},
		{"-3", 0, false},
		{"dbcanary-7d9f8b6c5-x2k4p", 0, false},
		{"dbcanary-+3", 0, false},
		{"dbcanary-1e3", 0, false},
		{"dbcanary-99999999999999999999", 0, false},
	} {
		got, ok := Ordinal(tc.host)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Ordinal(%q) = %d, %v; want %d, %v", tc.host, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFromEnvironment(t *testing.T) {
	host := func(h string) func() (string, error) { return func() (string, error) { return h, nil } }
	noHost := func() (string, error) { return "", errors.New("no hostname") }
	for _, tc := range []struct {
		name    string
		env     map[string]string
		host    func() (string, error)
		want    Environment
		wantErr string
	}{
		{"nothing", nil, host("laptop"), Environment{Index: -1}, ""},
		{"statefulset hostname", nil, host("dbcanary-4"), Environment{Index: 4, IndexFrom: "hostname dbcanary-4"}, ""},
		{"env wins over hostname", map[string]string{EnvIndex: "2", EnvCount: "5"}, host("dbcanary-4"),
			Environment{Index: 2, Count: 5, IndexFrom: EnvIndex, CountFrom: EnvCount}, ""},
		{"hostname unavailable", map[string]string{EnvCount: "3"}, noHost, Environment{Index: -1, Count: 3, CountFrom: EnvCount}, ""},
		{"bad index", map[string]string{EnvIndex: "x"}, host("a-1"), Environment{Index: -1}, `DBCANARY_SHARD_INDEX="x": not a non-negative integer`},
		{"bad count", map[string]string{EnvCount: "0"}, host("a-1"), Environment{Index: 1, IndexFrom: "hostname a-1"}, `DBCANARY_SHARD_COUNT="0": not a positive integer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromEnvironment(func(k string) string { return tc.env[k] }, tc.host)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error %q, want %q", gotErr, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
