package postgres

// SetReportPageSize makes Report read its findings n at a time and returns the undo. Tests
// that call it must not run in parallel: the page size is the package's.
func SetReportPageSize(n int) (restore func()) {
	old := reportPageSize
	reportPageSize = n
	return func() { reportPageSize = old }
}
