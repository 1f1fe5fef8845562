// Package faultpoint declares, once, the steps of a port's reconfiguration that fault injection
// can make fail: each point's name (as the manad family's FAULT_POINT attribute, the daemon and
// manactl spell it), the step it fails, the driver function whose failure it models, what the
// port is left in, and the errno it returns by default. vnic fires them, the daemon parses
// them with Parse, and manactl's help and completion list them with Names and Describe; none
// keeps a list of its own. It imports nothing of the project but genl/nlerr, so manactl links it
// without the model.
//
// Adding a point: a constant before NumPoints, its row in decls, and the p.fire(point) call in
// vnic at the step it fails.
package faultpoint

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// Point is a step of the reconfiguration state machine that fault injection can make fail.
type Point uint8

// The fault points, in the order a reconfiguration reaches them.
const (
	// Prealloc fails mana_pre_alloc_rxbufs half-way through: the port is left untouched.
	Prealloc Point = iota
	// Detach fails mana_detach before it stops anything: the port keeps running.
	Detach
	// Attach fails mana_attach after half of the queues were created: those are torn down
	// again and the port is left detached until the reset work restores it.
	Attach
	// NumPoints is the number of fault points.
	NumPoints
)

// Decl is the declaration of one fault point.
type Decl struct {
	Name    string     // the point's name on the wire and on manactl's command line
	Step    string     // the reconfiguration step it fails, as the log names it
	Mirrors string     // the driver function whose failure it models
	Leaves  string     // what the failed reconfiguration leaves the port in
	Errno   unix.Errno // what the failure returns unless told otherwise
	Why     string     // why that errno: what the driver's failure would return
}

// decls are the points' declarations, by Point.
var decls = [NumPoints]Decl{
	Prealloc: {Name: "prealloc", Step: "pre-allocation", Mirrors: "mana_pre_alloc_rxbufs",
		Leaves: "the port untouched", Errno: unix.ENOMEM, Why: "pre-allocation runs out of memory"},
	Detach: {Name: "detach", Step: "detach", Mirrors: "mana_detach",
		Leaves: "the port running as it was", Errno: unix.EIO, Why: "an I/O error"},
	Attach: {Name: "attach", Step: "attach", Mirrors: "mana_attach",
		Leaves: "the port detached until the reset work restores it", Errno: unix.EPROTO,
		Why: "a refused hardware-channel request, as a failed HWC message"},
}

// Points lists every fault point, in the order a reconfiguration reaches them.
var Points = func() (ps [NumPoints]Point) {
	for i := range ps {
		ps[i] = Point(i)
	}
	return ps
}()

// Decl returns the point's declaration; the zero Decl for a point out of range.
func (p Point) Decl() Decl {
	if p >= NumPoints {
		return Decl{}
	}
	return decls[p]
}

// String returns the point's name ("prealloc", "detach", "attach").
func (p Point) String() string {
	if p >= NumPoints {
		return fmt.Sprintf("point(%d)", uint8(p))
	}
	return decls[p].Name
}

// Errno returns what an injected failure at p returns unless told otherwise (EPROTO for a
// point out of range).
func (p Point) Errno() unix.Errno {
	if p >= NumPoints {
		return unix.EPROTO
	}
	return decls[p].Errno
}

// Names returns the points' names, in Points order.
func Names() []string {
	out := make([]string, NumPoints)
	for i, d := range decls {
		out[i] = d.Name
	}
	return out
}

// Alternatives returns the names as prose: "prealloc, detach or attach".
func Alternatives() string {
	n := Names()
	if len(n) < 2 {
		return strings.Join(n, "")
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// Parse parses a point's name. Errors: EINVAL for an unknown name, with the names it knows.
func Parse(s string) (Point, error) {
	for _, p := range Points {
		if decls[p].Name == s {
			return p, nil
		}
	}
	return 0, nlerr.New(unix.EINVAL, "unknown fault point %q (want %s)", s, Alternatives())
}
