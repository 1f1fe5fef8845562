//go:build !race

package genl

// raceEnabled: built with the race detector (see rawIO).
const raceEnabled = false
