package main

import (
	"context"
	"errors"
	"io"
)

// cmdMismatches: being implemented (finance review workflow).
func cmdMismatches(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("mismatches: not implemented yet")
}
