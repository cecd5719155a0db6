// Package httpapi is payrecon's HTTP surface: the public callback port (the platforms'
// notifications and the probes, nothing else), serve's admin port (metrics and probes) and
// the console process's port (the same plus the review console under /review/). It
// verifies, reads and settles callbacks through the interfaces it defines; it never opens a
// database or reads a key file.
package httpapi
