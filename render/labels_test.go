package render

import "testing"

// TestEveryLabelInBothLanguages: the one table the reports and the console read; a word
// added in English only would show English to a Chinese reader (and the reverse: a missing
// English label falls back to the key).
func TestEveryLabelInBothLanguages(t *testing.T) {
	if len(labels) < 150 {
		t.Fatalf("%d labels: the table lost its words", len(labels))
	}
	for key, l := range labels {
		if l.en == "" || l.zh == "" {
			t.Errorf("%q: en %q, zh %q: both languages need a label", key, l.en, l.zh)
		}
	}
}
