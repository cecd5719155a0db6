package statement

import (
	"fmt"
	"testing"
	"time"
)

func TestParseDecimal(t *testing.T) {
	for _, c := range []struct {
		in     string
		places int
		want   int64
		ok     bool
	}{
		{"0.01", 2, 1, true}, {"-0.04", 2, -4, true}, {"12.3", 2, 1230, true}, {"100", 2, 10000, true},
		{"0.00000", 5, 0, true}, {"-0.00600", 5, -600, true}, {"1.23456", 5, 123456, true},
		{"0.001", 2, 0, false}, {"", 2, 0, false}, {"1.", 2, 0, false}, {".5", 2, 0, false},
		{"+1.00", 2, 0, false}, {"1e3", 2, 0, false}, {"1,000.00", 2, 0, false}, {" 1.00", 2, 0, false},
		{"-", 2, 0, false}, {"92233720368547758.08", 2, 0, false}, {"0.000001", 5, 0, false},
	} {
		got, err := parseDecimal(c.in, c.places)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseDecimal(%q, %d) = %d, %v; want %d ok=%v", c.in, c.places, got, err, c.want, c.ok)
		}
	}
}

func TestFormatDecimal(t *testing.T) {
	for _, c := range []struct {
		v            int64
		places, show int
		want         string
	}{{1, 2, 2, "0.01"}, {-4, 2, 2, "-0.04"}, {600, 5, 5, "0.00600"}, {600, 5, 3, "0.006"}, {-123000, 5, 2, "-1.23"}} {
		if got := formatDecimal(c.v, c.places, c.show); got != c.want {
			t.Errorf("formatDecimal(%d,%d,%d) = %q, want %q", c.v, c.places, c.show, got, c.want)
		}
	}
}

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
