package statement

import (
	"encoding/binary"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// fastGBK decodes GBK exactly as x/text's decoder does, but copies runs of ASCII as they are:
// an Alipay bill is mostly trade numbers, amounts, times and ASCII punctuation, which that
// decoder writes one rune at a time, and decoding was the larger part of reading a bill.
// Only the runs of non-ASCII text go through x/text's decoder.
type fastGBK struct {
	transform.NopResetter
	dec transform.Transformer
}

func newFastGBK() fastGBK { return fastGBK{dec: simplifiedchinese.GBK.NewDecoder()} }

func (f fastGBK) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		if n := asciiRun(src[nSrc:]); n > 0 {
			m := copy(dst[nDst:], src[nSrc:nSrc+n])
			nDst, nSrc = nDst+m, nSrc+m
			if m < n {
				return nDst, nSrc, transform.ErrShortDst
			}
			continue
		}
		end := nSrc + gbkRun(src[nSrc:])
		// A run that stops before the end of src is whole: the byte after it starts a
		// character. One that reaches the end may have its last character cut.
		d, s, err := f.dec.Transform(dst[nDst:], src[nSrc:end], atEOF || end < len(src))
		nDst, nSrc = nDst+d, nSrc+s
		if err != nil {
			return nDst, nSrc, err
		}
	}
	return nDst, nSrc, nil
}

// asciiRun is how many bytes at the start of b are ASCII, eight at a time where it can.
func asciiRun(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 != 0 {
			break
		}
	}
	for i < len(b) && b[i] < 0x80 {
		i++
	}
	return i
}

// gbkRun is how many bytes at the start of b are non-ASCII characters, consumed as the GBK
// decoder consumes them: a lead byte (0x81-0xFE) with a valid trail byte (0x40-0x7E,
// 0x80-0xFE, which may look like ASCII) is one character; any other byte is one on its own.
func gbkRun(b []byte) int {
	i := 0
	for i < len(b) && b[i] >= 0x80 {
		if c := b[i]; c > 0x80 && c < 0xff && i+1 < len(b) && gbkTrail(b[i+1]) {
			i += 2
		} else {
			i++
		}
	}
	return i
}

func gbkTrail(c byte) bool { return 0x40 <= c && c < 0x7f || 0x80 <= c && c < 0xff }
