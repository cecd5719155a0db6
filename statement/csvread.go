package statement

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/text/transform"
)

// Alipay writes its bills as CSV: a text field that holds a comma or a double quote is quoted
// ("a,b", "" for a quote inside), and text fields end in a tab so that spreadsheets keep long
// numbers as text. They are read with encoding/csv, with two allowances:
//
//   - lazy quotes: a bare quote inside an unquoted field is text, not a broken bill (a quote
//     that opens and never closes shows up instead as a row with too few fields, which the
//     reader refuses naming its line);
//   - the tab after a closing quote ("a,b"<tab>,), which no CSV reader accepts, is dropped
//     before the CSV reader sees it (quoteTabs).
//
// Memory stays bounded per record (recordLimit), however the quotes fall.

// csvRecords reads a decoded (UTF-8) Alipay CSV record by record.
type csvRecords struct {
	r     *csv.Reader
	limit *recordLimit
	no    int // the line the last record read starts on
}

func newCSVRecords(decoded io.Reader) *csvRecords {
	return newCSVRecordsTabbed(transform.NewReader(decoded, quoteTabs{}))
}

// newCSVRecordsTabbed is newCSVRecords over text quoteTabs has already been through.
func newCSVRecordsTabbed(tabbed io.Reader) *csvRecords {
	limit := &recordLimit{r: tabbed}
	r := csv.NewReader(limit)
	// Field counts vary: the "#" lines are one field, the rows as many as the header names.
	r.FieldsPerRecord, r.LazyQuotes, r.ReuseRecord = -1, true, true
	return &csvRecords{r: r, limit: limit}
}

// errRecordTooLong ends a record that has read more than a bill's row can hold.
var errRecordTooLong = errors.New("record too long")

// next returns the next record that is not blank; io.EOF at the end. The record's slice is
// reused by the following call; its strings are not.
func (c *csvRecords) next() ([]string, error) {
	for {
		c.limit.read = 0
		row, err := c.r.Read()
		switch {
		case errors.Is(err, errRecordTooLong):
			return nil, fmt.Errorf("a row after line %d is longer than %d bytes: a quote that does not close?", c.no, maxLineBytes)
		case err != nil:
			return nil, err
		}
		c.no, _ = c.r.FieldPos(0)
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		return row, nil
	}
}

// text is a record as the line it came from, for the "#" lines (which hold no quotes, but
// may hold a half-width comma).
func text(row []string) string {
	if len(row) == 1 {
		return row[0]
	}
	return strings.Join(row, ",")
}

// recordLimit fails a read once one record has taken more than maxLineBytes (plus the CSV
// reader's 4 KiB read-ahead): with lazy quotes, a quote that never closes would otherwise
// read the rest of the bill into one field.
type recordLimit struct {
	r    io.Reader
	read int // bytes handed out since the current record began
}

func (l *recordLimit) Read(p []byte) (int, error) {
	if l.read > maxLineBytes {
		return 0, errRecordTooLong
	}
	n, err := l.r.Read(p)
	l.read += n
	return n, err
}

// quoteTabs drops the tabs between a quote and the comma or line end that follows them, so
// that a quoted field followed by Alipay's tab ("a,b"<tab>,) ends where it should. Inside a
// quoted field a quote is always doubled, so the only other text it touches is a doubled
// quote followed by tabs and a comma inside quoted text: that loses its tabs, and keeps its
// meaning.
type quoteTabs struct{ transform.NopResetter }

func (quoteTabs) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		n := bytes.IndexByte(src[nSrc:], '"') + 1 // through the next quote
		if n == 0 {
			n = len(src) - nSrc
		}
		if room := len(dst) - nDst; room < n { // what fits holds no quote: copy it, come back
			copy(dst[nDst:], src[nSrc:nSrc+room])
			return nDst + room, nSrc + room, transform.ErrShortDst
		}
		copy(dst[nDst:], src[nSrc:nSrc+n])
		nDst, nSrc = nDst+n, nSrc+n
		if src[nSrc-1] != '"' {
			continue
		}
		t := nSrc
		for t < len(src) && src[t] == '\t' {
			t++
		}
		switch {
		case t == len(src) && !atEOF:
			// Tabs may follow in the next block: decide with the quote and all of them.
			return nDst - 1, nSrc - 1, transform.ErrShortSrc
		case t == nSrc:
		case t == len(src) || src[t] == ',' || src[t] == '\n' || src[t] == '\r':
			nSrc = t
		}
	}
	return nDst, nSrc, nil
}
