package main

import (
	"context"
	"errors"
	"io"
)

// cmdReport: being implemented (csv, json, xlsx, html reports).
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("report: not implemented yet")
}
