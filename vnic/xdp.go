package vnic

import "fmt"

// XDPAction is an XDP verdict (enum xdp_action).
type XDPAction uint32

// The XDP verdicts.
const (
	XDPAborted  XDPAction = 0
	XDPDrop     XDPAction = 1
	XDPPass     XDPAction = 2
	XDPTx       XDPAction = 3
	XDPRedirect XDPAction = 4
)

// String returns the verdict's name as bpftool prints it.
func (a XDPAction) String() string {
	switch a {
	case XDPAborted:
		return "aborted"
	case XDPDrop:
		return "drop"
	case XDPPass:
		return "pass"
	case XDPTx:
		return "tx"
	case XDPRedirect:
		return "redirect"
	}
	return fmt.Sprintf("action(%d)", uint32(a))
}

// XDPProgram is an XDP program attached to a port. Implementations must be pointer types (a
// Settings value is compared with ==) and safe for concurrent Run calls on different queues.
type XDPProgram interface {
	// Name identifies the program in logs and in the port's state ("pass", "ebpf:foo").
	Name() string
	// Run runs the program on the frame buf[data:end] received on RX queue q. buf is the whole RX
	// buffer: buf[:data] is headroom the program may grow the frame into (bpf_xdp_adjust_head) and
	// buf[end:] tailroom. It returns the verdict and the frame's new bounds inside buf. An error is
	// treated as XDP_ABORTED (trace_xdp_exception).
	Run(q int, buf []byte, data, end int) (act XDPAction, newData, newEnd int, err error)
}

// BuiltinXDP is a program that returns a fixed verdict without touching the frame: the built-ins
// manad offers without an eBPF object ("pass", "drop", "tx", "aborted").
type BuiltinXDP struct {
	action XDPAction
}

// Built-in programs. They are shared values: attaching the same built-in twice is no change.
var (
	XDPProgPass    = &BuiltinXDP{XDPPass}
	XDPProgDrop    = &BuiltinXDP{XDPDrop}
	XDPProgTx      = &BuiltinXDP{XDPTx}
	XDPProgAborted = &BuiltinXDP{XDPAborted}
)

// BuiltinXDPByName returns the built-in program with the given name, or nil.
func BuiltinXDPByName(name string) *BuiltinXDP {
	for _, p := range []*BuiltinXDP{XDPProgPass, XDPProgDrop, XDPProgTx, XDPProgAborted} {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// Name returns the verdict's name.
func (b *BuiltinXDP) Name() string { return b.action.String() }

// Run returns the fixed verdict.
func (b *BuiltinXDP) Run(_ int, _ []byte, data, end int) (XDPAction, int, int, error) {
	return b.action, data, end, nil
}

// Equal reports whether b and o are the same built-in. Built-ins are shared values, so this is
// identity; comparers that do not look at unexported fields (go-cmp) use it to compare settings.
func (b *BuiltinXDP) Equal(o *BuiltinXDP) bool { return b == o }
