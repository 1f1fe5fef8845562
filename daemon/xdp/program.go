package xdp

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
)

// Limits of the package.
const (
	// MaxObjectSize is the largest ELF object Load accepts: far more than any XDP program
	// needs (the verifier caps a program at 1M instructions, 8 MiB, but real objects are a few
	// KiB), small enough that a netlink request cannot make the daemon parse megabytes.
	MaxObjectSize = 4 << 20
	// MinFrameLen is the shortest frame BPF_PROG_TEST_RUN accepts (ETH_HLEN).
	MinFrameLen = 14
)

// Program is a loaded XDP program run per frame with BPF_PROG_TEST_RUN. It implements
// vnic.XDPProgram; Run is safe for concurrent use (calls for one queue are serialised, calls
// for different queues run in parallel).
type Program struct {
	name string // "ebpf:<name>"
	prog *ebpf.Program
	coll *ebpf.Collection // the maps of a Load; nil for FromProgram

	ingress   atomic.Uint32 // ifindex passed as xdp_md.ingress_ifindex; 0 = none
	fallbacks atomic.Uint64 // frames run without the ingress context the kernel refused

	closeOnce sync.Once
	queues    []queueRunner // one per RX queue: the BPF_PROG_TEST_RUN arguments and lock
}

// queueRunner is what Run needs for one RX queue. The syscall arguments live here rather than
// on the stack because the kernel reads them through raw pointers: heap memory does not move,
// a goroutine stack may.
type queueRunner struct {
	mu   sync.Mutex
	fd   int // the program's fd; -1 once the Program is closed
	attr progRunAttr
	md   xdpMD    // context in and out
	_    [64]byte // keep neighbouring queues off each other's cache lines
}

// LoadError is a verifier's rejection of a program: the one error (genl/nlerr: errno and
// extack message, which it unwraps to) and the verifier's whole log. Load and FromProgram return
// every other refusal as a plain *nlerr.Error.
type LoadError struct {
	Err         *nlerr.Error
	VerifierLog []string
}

// Error returns "message: errno text", as ethtool prints a failed request.
func (e *LoadError) Error() string { return e.Err.Error() }

// Unwrap returns the *nlerr.Error, so errors.Is matches its errno.
func (e *LoadError) Unwrap() error { return e.Err }

func loadErr(errno unix.Errno, format string, args ...any) error {
	return nlerr.New(errno, format, args...)
}

// Load verifies and loads an XDP program from the bytes of an ELF object (as clang -target bpf
// writes it), picking the program in ELF section `section`, or the object's only XDP program
// when section is "". name is what Name reports after "ebpf:"; "" means the program's function
// name. The object's maps are created with it and live until Close.
//
// Errors are *nlerr.Error values (errno plus extack message; a verifier rejection is a
// *LoadError wrapping one): E2BIG for an object larger than MaxObjectSize; EINVAL for an empty or malformed object, an object without the program asked
// for (no XDP program, several and no section named, section not found or holding several
// programs), a program that is not an XDP program ("program in section X is not an XDP program
// (type Y)") or is a devmap/cpumap one, and a verifier rejection (the message carries the
// verifier's verdict, LoadError.VerifierLog the whole log); EPERM without the capabilities to
// load BPF programs; another errno the kernel gave (ENOMEM, E2BIG, ...) when loading fails
// otherwise.
func Load(obj []byte, section, name string) (*Program, error) {
	if len(obj) > MaxObjectSize {
		return nil, loadErr(unix.E2BIG, "BPF object of %d bytes is larger than the %d-byte limit", len(obj), MaxObjectSize)
	}
	if len(obj) == 0 {
		return nil, loadErr(unix.EINVAL, "empty BPF object")
	}
	spec, err := ebpf.LoadCollectionSpecFromReader(bytes.NewReader(obj))
	if err != nil {
		return nil, loadErr(unix.EINVAL, "not a valid BPF ELF object: %v", err)
	}
	ps, err := pickProgram(spec, section)
	if err != nil {
		return nil, err
	}
	// Load only the chosen program, the programs its tail calls may reach (those a program
	// array of the object is initialised with) and every map: the object's other programs are
	// no business of this port and must not fail its load.
	spec = spec.Copy()
	keep := map[string]bool{ps.Name: true}
	for _, m := range spec.Maps {
		if m.Type != ebpf.ProgramArray {
			continue
		}
		for _, kv := range m.Contents {
			if n, ok := kv.Value.(string); ok {
				keep[n] = true
			}
		}
	}
	for n := range spec.Programs {
		if !keep[n] {
			delete(spec.Programs, n)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, classifyLoadError(ps.Name, err)
	}
	prog := coll.DetachProgram(ps.Name)
	if prog == nil {
		coll.Close()
		return nil, loadErr(unix.EINVAL, "program %q was not loaded", ps.Name)
	}
	if name == "" {
		name = ps.Name
	}
	return newProgram(prog, coll, name), nil
}

// pickProgram finds the program Load should load. Errors are EINVAL *nlerr.Error values.
func pickProgram(spec *ebpf.CollectionSpec, section string) (*ebpf.ProgramSpec, error) {
	all := make([]*ebpf.ProgramSpec, 0, len(spec.Programs))
	for _, ps := range spec.Programs {
		all = append(all, ps)
	}
	slices.SortFunc(all, func(a, b *ebpf.ProgramSpec) int {
		return strings.Compare(a.SectionName+"/"+a.Name, b.SectionName+"/"+b.Name)
	})
	if len(all) == 0 {
		return nil, loadErr(unix.EINVAL, "BPF object contains no program")
	}
	var cands []*ebpf.ProgramSpec
	if section == "" {
		for _, ps := range all {
			if ps.Type == ebpf.XDP {
				cands = append(cands, ps)
			}
		}
		switch {
		case len(cands) == 0 && len(all) == 1:
			cands = all // report its type below
		case len(cands) == 0:
			return nil, loadErr(unix.EINVAL, "BPF object contains no XDP program (sections: %s)", sectionList(all))
		case len(cands) > 1:
			return nil, loadErr(unix.EINVAL, "BPF object contains %d XDP programs (sections: %s); name the section to load", len(cands), sectionList(cands))
		}
	} else {
		for _, ps := range all {
			if ps.SectionName == section {
				cands = append(cands, ps)
			}
		}
		switch {
		case len(cands) == 0:
			return nil, loadErr(unix.EINVAL, "no program in section %q (sections: %s)", section, sectionList(all))
		case len(cands) > 1:
			return nil, loadErr(unix.EINVAL, "section %q holds %d programs (%s); only one per section can be attached", section, len(cands), programList(cands))
		}
	}
	ps := cands[0]
	if ps.Type != ebpf.XDP {
		return nil, loadErr(unix.EINVAL, "program in section %s is not an XDP program (type %s)", ps.SectionName, ps.Type)
	}
	switch ps.AttachType {
	case ebpf.AttachXDPDevMap, ebpf.AttachXDPCPUMap:
		// BPF_PROG_TEST_RUN refuses them, and a driver never runs them on RX.
		return nil, loadErr(unix.EINVAL, "program in section %s is not an RX XDP program (attach type %s)", ps.SectionName, ps.AttachType)
	}
	return ps, nil
}

func sectionList(ps []*ebpf.ProgramSpec) string {
	var names []string
	for _, p := range ps {
		if !slices.Contains(names, p.SectionName) {
			names = append(names, p.SectionName)
		}
	}
	return strings.Join(names, ", ")
}

func programList(ps []*ebpf.ProgramSpec) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// classifyLoadError turns an error of ebpf.NewCollection into an *nlerr.Error (a *LoadError
// for a verifier rejection).
func classifyLoadError(prog string, err error) error {
	var ve *ebpf.VerifierError
	isVerifier := errors.As(err, &ve) && len(ve.Log) > 0
	var errno unix.Errno
	hasErrno := errors.As(err, &errno)
	switch {
	case !isVerifier && hasErrno && errno == unix.EPERM:
		return loadErr(unix.EPERM, "loading XDP program %q: not permitted (needs CAP_BPF and CAP_NET_ADMIN)", prog)
	case isVerifier:
		return &LoadError{
			Err:         &nlerr.Error{Errno: unix.EINVAL, Message: fmt.Sprintf("BPF verifier rejected program %q: %s", prog, verifierVerdict(ve.Log))},
			VerifierLog: ve.Log,
		}
	case errors.Is(err, ebpf.ErrNotSupported):
		return loadErr(unix.EOPNOTSUPP, "loading XDP program %q: %v", prog, err)
	case hasErrno:
		return loadErr(errno, "loading XDP program %q: %v", prog, err)
	}
	return loadErr(unix.EINVAL, "loading XDP program %q: %v", prog, err)
}

// verifierVerdict picks the lines of a verifier log that say why it rejected the program: the
// log traces every instruction and ends with the complaint (then a "processed N insns" line),
// so the last line, with the one before it when it is the instruction the complaint is about
// (the "R1 invalid mem access" kind), is what a user needs.
func verifierVerdict(log []string) string {
	for len(log) > 0 && (strings.TrimSpace(log[len(log)-1]) == "" || strings.HasPrefix(log[len(log)-1], "processed ")) {
		log = log[:len(log)-1]
	}
	if len(log) == 0 {
		return "(empty log)"
	}
	last := strings.TrimSpace(log[len(log)-1])
	if len(log) >= 2 && len(last) >= 2 && last[0] == 'R' && last[1] >= '0' && last[1] <= '9' {
		last = strings.TrimSpace(log[len(log)-2]) + ": " + last
	}
	const maxLen = 300
	if len(last) > maxLen {
		last = last[:maxLen] + "..."
	}
	return last
}

// FromProgram wraps an already loaded program (one built with cilium/ebpf's asm package, or
// loaded elsewhere). It duplicates p's file descriptor: the caller still owns p and may close
// it. name is what Name reports after "ebpf:"; "" means the program's kernel name.
// Errors (*nlerr.Error): EINVAL for a nil program or one that is not of type XDP; the errno of
// the failed dup otherwise.
func FromProgram(p *ebpf.Program, name string) (*Program, error) {
	if p == nil {
		return nil, loadErr(unix.EINVAL, "no program")
	}
	if p.Type() != ebpf.XDP {
		return nil, loadErr(unix.EINVAL, "program %s is not an XDP program (type %s)", p, p.Type())
	}
	c, err := p.Clone()
	if err != nil {
		var errno unix.Errno
		if !errors.As(err, &errno) {
			errno = unix.EINVAL
		}
		return nil, loadErr(errno, "duplicating program %s: %v", p, err)
	}
	if name == "" {
		if info, err := c.Info(); err == nil && info.Name != "" {
			name = info.Name
		} else {
			name = "xdp"
		}
	}
	return newProgram(c, nil, name), nil
}

func newProgram(prog *ebpf.Program, coll *ebpf.Collection, name string) *Program {
	p := &Program{name: "ebpf:" + name, prog: prog, coll: coll, queues: make([]queueRunner, vnic.MaxQueues)}
	fd := prog.FD()
	for i := range p.queues {
		p.queues[i].fd = fd
	}
	return p
}

// Name returns "ebpf:<name>".
func (p *Program) Name() string { return p.name }

// SetIngress sets the interface index Run passes to the program as ctx->ingress_ifindex, with
// the RX queue as ctx->rx_queue_index; 0 (the default) passes neither, and the program then
// sees the loopback device and queue 0. The index is looked up in the network namespace of the
// thread that calls Run, so it must name the port's TAP device in the daemon's namespace. It is
// not checked here: when BPF_PROG_TEST_RUN refuses it (no such device, or a queue at or above
// the device's real_num_rx_queues) Run runs the frame without it and counts an
// IngressFallback. Errors: EINVAL for a negative index or one above 2^31-1. Safe for
// concurrent use with Run.
func (p *Program) SetIngress(ifindex int) error {
	if ifindex < 0 || ifindex > 1<<31-1 {
		return nlerr.New(unix.EINVAL, "ifindex %d out of range", ifindex)
	}
	p.ingress.Store(uint32(ifindex))
	return nil
}

// Ingress returns the interface index set with SetIngress.
func (p *Program) Ingress() int { return int(p.ingress.Load()) }

// IngressFallbacks returns how many frames ran without the ingress context because the kernel
// refused it.
func (p *Program) IngressFallbacks() uint64 { return p.fallbacks.Load() }

// Errors Run returns for a frame it could not run. They are fixed values so that a stream of
// failing frames allocates nothing; vnic treats any error as XDP_ABORTED.
var (
	errBadQueue    error = &nlerr.Error{Errno: unix.EINVAL, Message: "XDP: RX queue index out of range"}
	errBadBounds   error = &nlerr.Error{Errno: unix.EINVAL, Message: "XDP: frame bounds outside the RX buffer"}
	errShortFrame  error = &nlerr.Error{Errno: unix.EINVAL, Message: "XDP: frame shorter than an Ethernet header"}
	errClosed      error = &nlerr.Error{Errno: unix.EBADF, Message: "XDP: program is closed"}
	errNoRoom      error = &nlerr.Error{Errno: unix.ENOSPC, Message: "XDP: program output does not fit the RX buffer"}
	errBadOutput   error = &nlerr.Error{Errno: unix.EIO, Message: "XDP: BPF_PROG_TEST_RUN returned an inconsistent context"}
	errInterrupted error = &nlerr.Error{Errno: unix.EINTR, Message: "XDP: test run interrupted before its output was copied"}
)

// Run runs the program on the frame buf[data:end] received on RX queue q, as mana_run_xdp does
// (vnic.XDPProgram). The program's output frame is written back into buf and its bounds are
// returned: its end stays at end (bpf_xdp_adjust_head) unless it grew by more than the
// headroom, in which case its start stays at data (bpf_xdp_adjust_tail); see the package
// documentation. Any verdict value is returned as is. Errors (errno-backed, the frame is then
// aborted): EINVAL for a queue outside 0..vnic.MaxQueues-1, bounds outside buf or a frame shorter
// than MinFrameLen; ENOSPC when the output does not fit buf; EBADF after Close; the kernel's
// errno when BPF_PROG_TEST_RUN fails otherwise. It allocates nothing, but to wrap an errno the
// kernel is not expected to give.
func (p *Program) Run(q int, buf []byte, data, end int) (vnic.XDPAction, int, int, error) {
	switch {
	case q < 0 || q >= len(p.queues):
		return vnic.XDPAborted, data, end, errBadQueue
	case data < 0 || end < data || end > len(buf):
		return vnic.XDPAborted, data, end, errBadBounds
	case end-data < MinFrameLen:
		return vnic.XDPAborted, data, end, errShortFrame
	}
	s := &p.queues[q]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return vnic.XDPAborted, data, end, errClosed
	}
	n := end - data
	ifindex := p.ingress.Load()
	s.md = xdpMD{dataEnd: uint32(n), ingressIfindex: ifindex}
	if ifindex != 0 {
		s.md.rxQueueIndex = uint32(q)
	}
	ret, outLen, errno := s.testRun(buf[data:end], buf)
	if ifindex != 0 && (errno == unix.EINVAL || errno == unix.ENODEV) {
		// xdp_convert_md_to_buff refused the device or queue before the program ran, so
		// running the frame again is safe.
		p.fallbacks.Add(1)
		s.md = xdpMD{dataEnd: uint32(n)}
		ret, outLen, errno = s.testRun(buf[data:end], buf)
	}
	switch errno {
	case 0:
	case unix.ENOSPC:
		return vnic.XDPAborted, data, end, errNoRoom
	case unix.EINTR:
		return vnic.XDPAborted, data, end, errInterrupted
	default:
		return vnic.XDPAborted, data, end, fmt.Errorf("XDP: BPF_PROG_TEST_RUN: %w", errno)
	}
	// The kernel wrote metadata then frame at buf[0:outLen]; ctx.data is the metadata length.
	meta, total := int(s.md.data), int(outLen)
	if meta > total || total > len(buf) {
		return vnic.XDPAborted, data, end, errBadOutput
	}
	size := total - meta
	newData, newEnd := end-size, end
	switch {
	case newData >= 0:
	case data+size <= len(buf):
		newData, newEnd = data, data+size
	default:
		newData, newEnd = 0, size
	}
	copy(buf[newData:newEnd], buf[meta:total])
	return vnic.XDPAction(ret), newData, newEnd, nil
}

// Close stops the program: Run calls that follow fail with EBADF (calls in progress finish
// first), and the program and its maps are released once nothing else references them.
// Further calls do nothing and return nil.
func (p *Program) Close() error {
	var err error
	p.closeOnce.Do(func() {
		for i := range p.queues {
			s := &p.queues[i]
			s.mu.Lock()
			s.fd = -1
			s.mu.Unlock()
		}
		err = p.prog.Close()
		if p.coll != nil {
			p.coll.Close()
		}
	})
	return err
}
