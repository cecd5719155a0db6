package reconcile

import "fmt"

// FormatYuan writes an amount in minor units (fen) as yuan with two decimals, by integer
// arithmetic only: 8880 -> "88.80", -5 -> "-0.05". It is the one formatter for every amount
// payrecon sends (Alipay takes yuan) or shows (reports, the review workflow).
func FormatYuan(fen int64) string {
	sign := ""
	u := uint64(fen)
	if fen < 0 {
		sign = "-"
		u = uint64(-(fen + 1)) + 1 // safe for math.MinInt64
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}

// FormatYuanOr is FormatYuan for a nullable amount: ifNull stands in for NULL, so each view
// chooses how an unknown amount looks ("" in CSV and JSON, "-" on a terminal).
func FormatYuanOr(fen *int64, ifNull string) string {
	if fen == nil {
		return ifNull
	}
	return FormatYuan(*fen)
}

// FormatYuanMilliFen writes thousandths of a fen as yuan with five decimals, exactly: bill
// fees (WeChat Pay writes them to five decimals) and the net after them. 198 -> "0.00198".
func FormatYuanMilliFen(mf int64) string {
	sign := ""
	u := uint64(mf)
	if mf < 0 {
		sign = "-"
		u = uint64(-(mf + 1)) + 1
	}
	return fmt.Sprintf("%s%d.%05d", sign, u/100000, u%100000)
}
