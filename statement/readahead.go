package statement

import (
	"io"
	"sync"
)

// aheadBlock and aheadBlocks size a readAhead: a few blocks in flight, a quarter of a MiB.
const (
	aheadBlock  = 64 << 10
	aheadBlocks = 4
)

// readAhead reads its source in a goroutine of its own, up to aheadBlocks blocks ahead of
// its reader. A bill's bytes are unzipped and decoded there while the CSV reader parses the
// blocks before them: on a million-line Alipay bill the two were one goroutine's 1.6 s, half
// of it the unzipping and decoding, while the staging COPY waited on it.
//
// Close stops the goroutine and waits for it, so the source may be closed after it (and
// must not be before). Bytes come out exactly as read, in order, with the source's error
// after the last of them.
type readAhead struct {
	full chan aheadFill
	free chan []byte
	stop chan struct{}
	done chan struct{}
	once sync.Once

	cur  []byte // what is left of the block being read
	held []byte // that block, to give back once read
	err  error  // the source's error, once every byte before it was read
}

type aheadFill struct {
	b   []byte
	err error
}

func newReadAhead(src io.Reader) *readAhead {
	ra := &readAhead{full: make(chan aheadFill, aheadBlocks), free: make(chan []byte, aheadBlocks+1),
		stop: make(chan struct{}), done: make(chan struct{})}
	for range aheadBlocks + 1 {
		ra.free <- make([]byte, aheadBlock)
	}
	go ra.fill(src)
	return ra
}

func (ra *readAhead) fill(src io.Reader) {
	defer close(ra.done)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.stop:
			return
		}
		n, err := fillBlock(src, b)
		select {
		case ra.full <- aheadFill{b: b[:n], err: err}:
		case <-ra.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// fillBlock reads src until b is full or src fails, and returns src's error as it is: not
// io.ReadFull, which turns an io.ErrUnexpectedEOF of the source's own (a gzip cut short) into
// the end of a short block.
func fillBlock(src io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := src.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (ra *readAhead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.err != nil {
			return 0, ra.err
		}
		if ra.held != nil {
			ra.free <- ra.held[:cap(ra.held)] // never blocks: free holds every block there is
			ra.held = nil
		}
		f := <-ra.full
		ra.cur, ra.held, ra.err = f.b, f.b, f.err
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// Close stops the read-ahead and waits until it no longer touches its source.
func (ra *readAhead) Close() error {
	ra.once.Do(func() { close(ra.stop) })
	<-ra.done
	return nil
}
