package statement

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// maxLineBytes bounds one line of a bill: a detail row is a few hundred bytes, so anything
// longer is not a bill (and must not grow memory).
const maxLineBytes = 64 << 10

// chinaTime is GMT+8, the zone both platforms write their bill times in.
var chinaTime = time.FixedZone("CST", 8*60*60)

const timeLayout = "2006-01-02 15:04:05"

var utf8BOM = []byte("\xef\xbb\xbf")

// lineReader hands out a text stream's lines one at a time without keeping them: the
// returned bytes are valid until the next call.
type lineReader struct {
	br   *bufio.Reader
	no   int    // number of the line last returned
	long []byte // reused when a line spans bufio's buffer
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// errLineTooLong is reported with the line's number.
var errLineTooLong = fmt.Errorf("line longer than %d bytes", maxLineBytes)

// next returns the next line without its end of line (\n or \r\n), io.EOF at the end, or
// the reader's error. A last line without a newline is still a line. The line is one
// allocation; the fields split from it share it.
func (l *lineReader) next() (string, error) {
	line, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.long = append(l.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(l.long) > maxLineBytes {
				l.no++
				return "", errLineTooLong
			}
			line, err = l.br.ReadSlice('\n')
			l.long = append(l.long, line...)
		}
		line = l.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if len(line) == 0 && err != nil {
		return "", io.EOF
	}
	l.no++
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	if l.no == 1 {
		line = bytes.TrimPrefix(line, utf8BOM)
	}
	return string(line), nil
}

// splitBackticks splits one WeChat Pay detail or summary row, appending to dst. WeChat Pay
// escapes nothing: every field starts with a backtick and fields are joined by ",`", so a
// comma, a double quote or JSON inside a field is just text and only ",`" ends a field. ok
// is false when the row does not start with a backtick. The fields share the row's memory.
func splitBackticks(dst []string, s string) (fields []string, ok bool) {
	if !strings.HasPrefix(s, "`") {
		return dst, false
	}
	start := 1
	for i := start; ; i++ {
		// A comma is searched for, then checked for its backtick: a bill's fields hold few
		// commas, and this is faster than strings.Index on every field of every line.
		j := strings.IndexByte(s[i:], ',')
		if j < 0 {
			return append(dst, s[start:]), true
		}
		if i += j; i+1 < len(s) && s[i+1] == '`' {
			dst = append(dst, s[start:i])
			i++
			start = i + 1
		}
	}
}

// splitNames splits a WeChat Pay header row: plain names joined by commas, no backticks.
func splitNames(dst []string, s string) []string {
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			return append(dst, s)
		}
		dst = append(dst, s[:i])
		s = s[i+1:]
	}
}

// cleanCell strips what the platforms wrap a value in: the tab Alipay appends so that
// spreadsheets keep long numbers as text, and spaces. (WeChat Pay's leading backtick, there
// for the same reason, is taken off by splitBackticks.)
func cleanCell(s string) string {
	return strings.TrimSpace(s)
}

// columns maps header names to positions. Names are normalised (half-width parentheses to
// full-width, spaces and tabs trimmed) so a re-saved file still matches.
type columns map[string]int

var headerNorm = strings.NewReplacer("(", "（", ")", "）", "`", "")

func newColumns(header []string) columns {
	c := columns{}
	for i, h := range header {
		name := headerNorm.Replace(strings.TrimSpace(h))
		if _, dup := c[name]; !dup && name != "" {
			c[name] = i
		}
	}
	return c
}

// find returns the position of the first name present, or -1.
func (c columns) find(names ...string) int {
	for _, n := range names {
		if i, ok := c[n]; ok {
			return i
		}
	}
	return -1
}

// cell returns the cleaned field at i, "" when i is -1 or past the row's end.
func cell(row []string, i int) string {
	if i < 0 || i >= len(row) {
		return ""
	}
	return cleanCell(row[i])
}

// parseChinaTime reads "yyyy-MM-dd HH:mm:ss" in China time. It is on every line of a
// million-line bill, so it reads the fixed layout by hand (time.Parse costs several times
// more) and refuses anything else, including dates that do not exist.
func parseChinaTime(s string) (time.Time, error) {
	bad := func() (time.Time, error) { return time.Time{}, fmt.Errorf("time %q: want yyyy-MM-dd HH:mm:ss", s) }
	if len(s) != len(timeLayout) || s[4] != '-' || s[7] != '-' || !digits(s[:4]) || !digits(s[5:7]) || !digits(s[8:10]) {
		return bad()
	}
	secs, ok := timeOfDay(s[10:])
	if !ok {
		return bad()
	}
	y, m, d := twoDigits(s)*100+twoDigits(s[2:]), twoDigits(s[5:]), twoDigits(s[8:])
	t := time.Date(y, time.Month(m), d, 0, 0, secs, 0, chinaTime)
	// time.Date normalises 02-30 to 03-02: a date that moved did not exist.
	if m < 1 || m > 12 || t.Day() != d {
		return bad()
	}
	return t, nil
}

// timeOfDay reads the " HH:mm:ss" that ends a bill's time, in seconds since midnight.
func timeOfDay(s string) (int, bool) {
	if len(s) != 9 || s[0] != ' ' || s[3] != ':' || s[6] != ':' || !digits(s[1:3]) || !digits(s[4:6]) || !digits(s[7:9]) {
		return 0, false
	}
	h, m, sec := twoDigits(s[1:]), twoDigits(s[4:]), twoDigits(s[7:])
	if h > 23 || m > 59 || sec > 59 {
		return 0, false
	}
	return h*3600 + m*60 + sec, true
}

func twoDigits(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

// chinaDays parses a bill's times as parseChinaTime does, remembering the last date it met:
// a bill's lines are nearly all of one or two days, and checking the date (time.Date and its
// normalisation) is most of parsing a time, twice on each of a million lines.
type chinaDays struct {
	date     string // "yyyy-MM-dd" of the last time parsed
	midnight int64  // that date's 00:00:00 in China time, unix seconds
}

func (c *chinaDays) parse(s string) (time.Time, error) {
	if len(s) == len(timeLayout) && c.date != "" && s[:10] == c.date {
		if secs, ok := timeOfDay(s[10:]); ok {
			return time.Unix(c.midnight+int64(secs), 0).In(chinaTime), nil
		}
	}
	t, err := parseChinaTime(s)
	if err != nil {
		return t, err
	}
	secs, _ := timeOfDay(s[10:])
	c.date, c.midnight = s[:10], t.Unix()-int64(secs)
	return t, nil
}

// tally adds a line to running totals.
func (t *Totals) add(l Line) {
	if l.Kind == reconcile.BillRefund {
		t.Refunds++
		t.RefundsMinor += l.AmountMinor
	} else {
		t.Payments++
		t.PaymentsMinor += l.AmountMinor
	}
	t.FeeMilliFen += l.FeeMilliFen
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
