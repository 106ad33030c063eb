package baseline

import "fmt"

// Merge adds from's sources and figures to b: a calibrated file (`dbcanary
// calibrate`) merged into the reference one, so that the targets it measured
// alert on their own figures and every other target on b's. Each figure of
// from keeps the factors it was written with: from's file-level factors are
// copied onto the figures that have none of their own (a calibrated p99 ×2
// and ×5, not the reference's ×1 and ×3, which would warn at the measured
// p99 itself). b keeps its policy, factors and buckets. A source or figure
// id present in both files is an error, as is a merged file that no longer
// validates (two figures of one target, op, phase and stat). b is left
// unchanged on error.
func (b *File) Merge(from *File) error {
	m := *b
	m.Sources = append([]Source(nil), b.Sources...)
	m.Figures = append([]Figure(nil), b.Figures...)
	ids := map[string]bool{}
	for _, s := range b.Sources {
		ids["source "+s.ID] = true
	}
	for _, f := range b.Figures {
		ids["figure "+f.ID] = true
	}
	for _, s := range from.Sources {
		if ids["source "+s.ID] {
			return fmt.Errorf("merging: source %q is in both files", s.ID)
		}
		m.Sources = append(m.Sources, s)
	}
	for _, f := range from.Figures {
		if ids["figure "+f.ID] {
			return fmt.Errorf("merging: figure %q is in both files", f.ID)
		}
		if f.Factors == nil {
			fc := from.Factors
			f.Factors = &fc
		}
		m.Figures = append(m.Figures, f)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("merging: %w", err)
	}
	*b = m
	return nil
}
