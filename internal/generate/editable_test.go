package generate

import "testing"

// TestBoardsNotEditable: the provisioned boards are regenerated from the
// baseline, so an edit made in Grafana's UI would be lost at the next
// provisioning; the boards say so by not being editable (dashboard-linter's
// uneditable-dashboard rule). Copy a board ("Save as") to experiment.
func TestBoardsNotEditable(t *testing.T) {
	boards, err := Dashboards(shippedBaseline(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range boards {
		if d.Editable == nil || *d.Editable {
			t.Errorf("%s: editable", name)
		}
	}
}
