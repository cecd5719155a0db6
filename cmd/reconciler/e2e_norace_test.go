//go:build !race

package main

// e2eRace: the tests run without -race; so is the reconciler binary.
const e2eRace = false
