package statement

import (
	"fmt"
	"testing"
	"time"
)

func TestParseChinaTime(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"2019-09-16 10:55:23", true}, {"2024-02-29 23:59:59", true}, {"2019-09-16 00:00:00", true},
		{"2023-02-29 10:00:00", false}, {"2019-13-01 10:00:00", false}, {"2019-00-01 10:00:00", false},
		{"2019-09-16 24:00:00", false}, {"2019-09-16 10:60:00", false}, {"2019-09-16 10:55:60", false},
		{"2019-09-16T10:55:23", false}, {"2019/09/16 10:55:23", false}, {"2019-09-16 10:55", false},
		{"2019-09-1a 10:55:23", false}, {"", false}, {"2019-09-16 10:55:23.5", false},
	} {
		got, err := parseChinaTime(c.in)
		// A reader's remembered date gives the same time and the same refusal, whatever
		// date it met before.
		for _, before := range []string{"2019-09-16 12:00:00", "2023-02-28 23:00:00", "2024-02-29 01:02:03"} {
			var days chinaDays
			if _, err := days.parse(before); err != nil {
				t.Fatal(err)
			}
			dgot, derr := days.parse(c.in)
			if dgot != got || fmt.Sprint(derr) != fmt.Sprint(err) {
				t.Errorf("after %s, chinaDays.parse(%q) = %v, %v; parseChinaTime gives %v, %v", before, c.in, dgot, derr, got, err)
			}
		}
		if (err == nil) != c.ok {
			t.Errorf("parseChinaTime(%q): %v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if c.ok {
			want, _ := time.ParseInLocation(timeLayout, c.in, chinaTime)
			if !got.Equal(want) || got.Location() != chinaTime {
				t.Errorf("parseChinaTime(%q) = %v, want %v", c.in, got, want)
			}
		}
	}
}
