package statement

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/text/transform"
)

// Alipay writes its bills as CSV: a text field that holds a comma or a double quote is quoted
// ("a,b", "" for a quote inside, a line break inside quotes is text), and text fields end in
// a tab so that spreadsheets keep long numbers as text. csvRecords reads them as
// encoding/csv does with LazyQuotes (a differential test holds the two equal), with two
// allowances:
//
//   - lazy quotes: a bare quote inside an unquoted field is text, not a broken bill (a quote
//     that opens and never closes shows up instead as a row with too few fields, which the
//     reader refuses naming its line);
//   - the tab after a closing quote ("a,b"<tab>,), which no CSV reader accepts, is dropped
//     before the reader sees it (quoteTabs).
//
// It is its own reader, not encoding/csv, for speed: a million-line bill is a million rows,
// nearly all without a quote, and such a row is one copy and a split on its commas (a third
// of encoding/csv's cost, which was the largest part of reading a bill).
//
// Memory stays bounded per record (maxLineBytes), however the quotes fall.

// csvRecords reads a decoded (UTF-8) Alipay CSV record by record.
type csvRecords struct {
	br       *bufio.Reader
	raw      []byte   // a line longer than br's buffer
	fields   []byte   // a quoted record's fields, unquoted, end to end
	ends     []int    // where each of them ends in fields
	row      []string // the record handed out, reused
	lines    int      // lines read so far
	recBytes int      // bytes the current record has read
	no       int      // the line the last record read starts on
}

func newCSVRecords(decoded io.Reader) *csvRecords {
	return newCSVRecordsTabbed(transform.NewReader(decoded, quoteTabs{}))
}

// newCSVRecordsTabbed is newCSVRecords over text quoteTabs has already been through.
func newCSVRecordsTabbed(tabbed io.Reader) *csvRecords {
	return &csvRecords{br: bufio.NewReaderSize(tabbed, 64<<10)}
}

// errRecordTooLong ends a record that has read more than a bill's row can hold.
var errRecordTooLong = errors.New("record too long")

// next returns the next record that is not blank; io.EOF at the end. The record's slice is
// reused by the following call; its strings are not.
func (c *csvRecords) next() ([]string, error) {
	for {
		row, err := c.read()
		switch {
		case errors.Is(err, errRecordTooLong):
			return nil, fmt.Errorf("a row after line %d is longer than %d bytes: a quote that does not close?", c.no, maxLineBytes)
		case err != nil:
			return nil, err
		}
		if len(row) == 1 && strings.TrimSpace(row[0]) == "" {
			continue
		}
		return row, nil
	}
}

// read returns the next record, empty lines skipped; io.EOF at the end.
func (c *csvRecords) read() ([]string, error) {
	c.recBytes = 0
	var line []byte
	var err error
	for {
		line, err = c.readLine()
		if err != nil || len(line) != lengthNL(line) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	// c.no moves only once the record is whole: a record that cannot be read is "after" the
	// last one that could.
	start := c.lines
	c.row = c.row[:0]
	if bytes.IndexByte(line, '"') >= 0 {
		row, err := c.quoted(line)
		if err != nil {
			return nil, err
		}
		c.no = start
		return row, nil
	}
	c.no = start
	// No quote anywhere: every comma ends a field.
	s := string(line[:len(line)-lengthNL(line)])
	for {
		i := strings.IndexByte(s, ',')
		if i < 0 {
			break
		}
		c.row = append(c.row, s[:i])
		s = s[i+1:]
	}
	return append(c.row, s), nil
}

// quoted reads a record that holds a quote somewhere, starting with its first line, field by
// field: a field that starts with a quote runs to the quote that closes it (a doubled quote
// is one quote of text; a quote followed by anything but a comma or the line's end is text
// too), over as many lines as it takes.
func (c *csvRecords) quoted(line []byte) ([]string, error) {
	c.fields, c.ends = c.fields[:0], c.ends[:0]
	var err error
fields:
	for {
		if len(line) == 0 || line[0] != '"' {
			i := bytes.IndexByte(line, ',')
			if i < 0 {
				c.fields = append(c.fields, line[:len(line)-lengthNL(line)]...)
				c.ends = append(c.ends, len(c.fields))
				break
			}
			c.fields = append(c.fields, line[:i]...)
			c.ends = append(c.ends, len(c.fields))
			line = line[i+1:]
			continue
		}
		line = line[1:]
		for {
			i := bytes.IndexByte(line, '"')
			switch {
			case i >= 0:
				c.fields = append(c.fields, line[:i]...)
				line = line[i+1:]
				switch {
				case len(line) > 0 && line[0] == '"':
					c.fields = append(c.fields, '"')
					line = line[1:]
				case len(line) > 0 && line[0] == ',':
					c.ends = append(c.ends, len(c.fields))
					line = line[1:]
					continue fields
				case len(line) == lengthNL(line):
					c.ends = append(c.ends, len(c.fields))
					break fields
				default:
					c.fields = append(c.fields, '"')
				}
			case len(line) > 0:
				// The line ends inside the quotes: the field goes on on the next one.
				c.fields = append(c.fields, line...)
				if err != nil {
					break fields
				}
				if line, err = c.readLine(); errors.Is(err, io.EOF) {
					err = nil
				}
			default:
				// The bill ends inside the quotes: what there is is the field.
				c.ends = append(c.ends, len(c.fields))
				break fields
			}
		}
	}
	if err != nil {
		return nil, err
	}
	s, from := string(c.fields), 0
	for _, end := range c.ends {
		c.row = append(c.row, s[from:end])
		from = end
	}
	return c.row, nil
}

// readLine reads one line, "\r\n" read as "\n"; a last line without its "\n" comes with a
// nil error, and io.EOF only after it.
func (c *csvRecords) readLine() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		c.raw = append(c.raw[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(c.raw) <= maxLineBytes {
			line, err = c.br.ReadSlice('\n')
			c.raw = append(c.raw, line...)
		}
		line = c.raw
	}
	if c.recBytes += len(line); c.recBytes > maxLineBytes {
		return nil, errRecordTooLong
	}
	if len(line) > 0 && errors.Is(err, io.EOF) {
		err = nil
		if line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
	}
	c.lines++
	if n := len(line); n >= 2 && line[n-2] == '\r' && line[n-1] == '\n' {
		line[n-2] = '\n'
		line = line[:n-1]
	}
	return line, err
}

// lengthNL is 1 when b ends in a line break.
func lengthNL(b []byte) int {
	if len(b) > 0 && b[len(b)-1] == '\n' {
		return 1
	}
	return 0
}

// text is a record as the line it came from, for the "#" lines (which hold no quotes, but
// may hold a half-width comma).
func text(row []string) string {
	if len(row) == 1 {
		return row[0]
	}
	return strings.Join(row, ",")
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
