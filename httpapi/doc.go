// Package httpapi is payrecon's HTTP surface: the public callback port (the platforms'
// notifications and the probes, nothing else) and the admin port (metrics, probes and, when
// one is plugged in, the review console under /review/). It verifies, reads and settles
// callbacks through the interfaces it defines; it never opens a database or reads a key file.
package httpapi
