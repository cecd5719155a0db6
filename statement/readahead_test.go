package statement

import (
	"bytes"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// TestReadAheadGivesTheSourceAsIs: every byte, in order, then the source's own error, for
// sources shorter than a block, a block exactly, and several blocks and a bit.
func TestReadAheadGivesTheSourceAsIs(t *testing.T) {
	errBroken := errors.New("broken bill")
	for _, tc := range []struct {
		name string
		size int
		err  error // the source's error after its bytes; nil: io.EOF
	}{
		{"empty", 0, nil},
		{"one byte", 1, nil},
		{"a block less one", aheadBlock - 1, nil},
		{"a block", aheadBlock, nil},
		{"more blocks than in flight", aheadBlock*(aheadBlocks+3) + 7, nil},
		{"broken after some blocks", aheadBlock*2 + 5, errBroken},
		{"broken at once", 0, errBroken},
		// a gzip cut short says so with io.ErrUnexpectedEOF: it is not the end of the bill
		{"cut short mid-block", aheadBlock + 9, io.ErrUnexpectedEOF},
		{"cut short at a block's end", aheadBlock, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]byte, tc.size)
			for i := range want {
				want[i] = byte(i*7 + i/251)
			}
			var src io.Reader = bytes.NewReader(want)
			if tc.err != nil {
				src = io.MultiReader(src, iotest.ErrReader(tc.err))
			}
			ra := newReadAhead(iotest.HalfReader(src)) // short reads from the source too
			defer ra.Close()
			got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(ra, int64(tc.size)))) // byte by byte first
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes (%v), want the %d the source holds", len(got), err, tc.size)
			}
			rest, err := io.ReadAll(ra)
			if len(rest) != 0 {
				t.Errorf("%d bytes after the source's last", len(rest))
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Errorf("end: %v, want the source's %v", err, tc.err)
			}
			if tc.err == nil && err != nil {
				t.Errorf("end: %v, want io.EOF", err)
			}
		})
	}
}

// countingSource is an endless source that counts its reads.
type countingSource struct{ reads atomic.Int64 }

func (c *countingSource) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return len(p), nil
}

// TestReadAheadCloseStopsReading: a reader that stops early (a rejected bill) closes the
// read-ahead; the goroutine stops and never reads the source again, so the source can be
// closed safely right after.
func TestReadAheadCloseStopsReading(t *testing.T) {
	src := &countingSource{}
	ra := newReadAhead(src)
	if _, err := io.ReadFull(ra, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { ra.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not stop the read-ahead within 10 s")
	}
	n := src.reads.Load()
	if n > aheadBlocks+1 {
		t.Errorf("%d reads of the source before Close, want at most %d (the blocks in flight)", n, aheadBlocks+1)
	}
	ra.Close() // twice is fine
	if m := src.reads.Load(); m != n {
		t.Errorf("the source was read %d more times after Close", m-n)
	}
}
