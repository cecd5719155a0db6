package httpapi

import (
	"strings"
	"testing"
	"time"
)

func TestClip(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"short value kept", "PUB_KEY_ID_0114", "PUB_KEY_ID_0114"},
		{"newline escaped", "a\n{\"level\":\"info\"}", `a\n{\"level\":\"info\"}`},
		{"terminal escape escaped", "\x1b[31mred", `\x1b[31mred`},
		{"non-ASCII escaped", "序列号", `\u5e8f\u5217\u53f7`},
		{"long value cut", strings.Repeat("A", 900<<10), strings.Repeat("A", maxLoggedValue-3) + "..."},
		{"escapes that grow past the limit cut", strings.Repeat("\x00", 100), strings.Repeat(`\x00`, 100)[:maxLoggedValue-3] + "..."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := clip(tc.in)
			if got != tc.want {
				t.Fatalf("clip = %q, want %q", got, tc.want)
			}
			if len(got) > maxLoggedValue {
				t.Fatalf("clip gave %d bytes", len(got))
			}
		})
	}
}

func TestLogSamplerLetsABurstThroughThenCounts(t *testing.T) {
	s := newLogSampler()
	allowed := 0
	for range 1000 {
		if s.allow() {
			allowed++
		}
	}
	if allowed < 20 || allowed > 22 {
		t.Fatalf("%d of 1000 allowed at once, want the burst of 20", allowed)
	}
	if n := s.suppressed.Load(); int(n) != 1000-allowed {
		t.Fatalf("suppressed %d, want %d", n, 1000-allowed)
	}
	time.Sleep(1100 * time.Millisecond)
	if !s.allow() {
		t.Fatal("a line a second must still get through")
	}
}
