package probes

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestNodeTrail(t *testing.T) {
	// No trail in the context: adding is a no-op, listing is empty.
	NodeTrailFrom(context.Background()).Add("a:1")
	if got := NodeTrailFrom(context.Background()).List(); got != nil {
		t.Errorf("no trail listed %v", got)
	}
	ctx, tr := WithNodeTrail(context.Background())
	if NodeTrailFrom(ctx) != tr {
		t.Fatal("the context does not carry the trail")
	}
	for _, n := range []string{"a:1", "a:1", "", "b:1", "c:1", "d:1"} {
		NodeTrailFrom(ctx).Add(n)
	}
	if got := fmt.Sprint(tr.List()); got != "[a:1 b:1 c:1]" {
		t.Errorf("trail %s, want [a:1 b:1 c:1] (once each, in order, at most %d)", got, MaxTrailNodes)
	}
}

func TestNameNodes(t *testing.T) {
	inner := errors.New("driver error")
	base := Fail(CauseServer, fmt.Errorf("store x: op: %w", inner))
	err := NameNodes(base, []string{"a:1", "b:1"}, true, "node")
	if err.Error() != "store x: op: driver error (nodes a:1, then b:1)" || CauseOf(err) != CauseServer || !errors.Is(err, inner) {
		t.Errorf("got %q (cause %s)", err, CauseOf(err))
	}
	if err := NameNodes(base, []string{"a:1"}, true, "coordinator"); err.Error() != "store x: op: driver error (coordinator a:1)" {
		t.Errorf("one node: %q", err)
	}
	if NameNodes(base, []string{"a:1"}, false, "node") != base || NameNodes(base, nil, true, "node") != base || NameNodes(nil, []string{"a:1"}, true, "node") != nil {
		t.Error("a one-node target, an op that reached no node, or a success must be left as they are")
	}
}
