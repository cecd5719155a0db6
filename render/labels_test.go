package render

import (
	"regexp"
	"slices"
	"testing"
)

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

// fmtVerb is a fmt verb of a label that is a format (the console's messages).
var fmtVerb = regexp.MustCompile(`%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-zA-Z%]`)

// TestLabelFormatsTakeTheSameArguments: a message label is a format the console fills; both
// languages must take the same arguments, or one of them prints %!s(MISSING) or
// %!(EXTRA ...) to its reader. (Verbs may differ in kind: the English %q quotes a value,
// the Chinese 「%s」 does.)
func TestLabelFormatsTakeTheSameArguments(t *testing.T) {
	formats := 0
	for key, l := range labels {
		en, zh := fmtVerb.FindAllString(l.en, -1), fmtVerb.FindAllString(l.zh, -1)
		en, zh = slices.DeleteFunc(en, isPercent), slices.DeleteFunc(zh, isPercent)
		if len(en) != len(zh) {
			t.Errorf("%q: en takes %q, zh takes %q", key, en, zh)
		}
		if len(en) > 0 {
			formats++
		}
	}
	if formats < 10 {
		t.Fatalf("%d labels are formats: the pattern no longer finds the console's messages", formats)
	}
}

func isPercent(v string) bool { return v == "%%" }
