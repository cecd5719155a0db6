// Package render turns findings, reports and runs into what people read: CSV, JSON, XLSX and
// HTML files for finance, and aligned tables for a terminal. It formats; it never queries or
// decides. Amounts are integer minor units until the last step, where reconcile.FormatYuan
// writes them; text that came from a platform is escaped for the medium it lands in.
package render
