//go:build race

package main

// e2eRace: the tests run with -race, so the reconciler binary is built with it too.
const e2eRace = true
