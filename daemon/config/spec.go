package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config/bytesize"
	"github.com/manad/manad/daemon/tap"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
	"github.com/manad/manad/vnic/rxbuf"
)

// Defaults of the settings that are not the port model's.
const (
	// DefaultSegment is the wire segment a port joins when its spec names none.
	DefaultSegment = "default"
	// UnlimitedMemory is PortSpec.MemoryBudget for a port without an RX memory limit.
	UnlimitedMemory = bytesize.Unlimited
	// MaxSegmentName bounds a segment name's length.
	MaxSegmentName = 64
)

// PortSpec is everything about one port: its fixed configuration (vnic.Hardware, embedded: the
// "hardware"), where it lives (TAP name, MAC, netns, wire segment) and the settings it starts with
// (vnic.Settings, embedded, with the RSS key and NAPI settings). A [[port]] table of the configuration file is one PortSpec; so is a
// port created at runtime, which the state file remembers in full.
type PortSpec struct {
	Name       string           // the port's and its TAP netdev's name; unique in the daemon
	MAC        net.HardwareAddr // unicast EUI-48
	NetNS      string           // named network namespace (/run/netns/NAME) of the TAP; "" = manad's
	Segment    string           // the wire segment (learning L2 switch) the port is plugged into
	Persistent bool             // the TAP survives manad exiting, keeping its addresses and routes
	Offload    bool             // the TAP carries virtio headers: checksum and segmentation offloads

	// Hardware is the port's fixed configuration, the port model's own struct (vnic.Config
	// embeds it too): a spec holds no copy of its fields. A spec's MemoryBudget is never 0
	// (Validate): UnlimitedMemory is vnic's negative, no limit.
	vnic.Hardware

	// Settings are the settings the port starts with, the port model's own struct too. Its
	// rings are powers of two (the file's values are rounded up, as the driver does) and its
	// XDP program is nil or a built-in (vnic.BuiltinXDPByName: the file, the state file and
	// PORT_NEW name it).
	vnic.Settings
	// RSSKey is the Toeplitz key the port starts with (vnic.Config.RSSKey): nil for the
	// default; the state file's, when a restart must keep a key set at runtime.
	RSSKey []byte
	// NAPI is every queue's NAPI settings to start with (napi_defer_hard_irqs,
	// gro_flush_timeout, irq_suspend_timeout: the kernel's per-device sysfs knobs, which set
	// every NAPI of the device).
	NAPI vnic.NAPIConfig
	// NAPIQueues, when not nil, replaces NAPI: queue index q starts with NAPIQueues[q] (the zero
	// value beyond its length). The state file's, when a restart must keep what napi-set
	// changed per queue.
	NAPIQueues []vnic.NAPIConfig

	// Line is where the port's [[port]] header is in the configuration file; 0 for a port that
	// was not defined there.
	Line int
}

// DefaultPortSpec returns the spec of a port named name with every default filled in: the
// driver's defaults for the port model (vnic.DefaultHardware, vnic.Default*), a MAC
// derived from the name (DeriveMAC), the daemon's own netns, DefaultSegment, persistent, with
// offloads.
func DefaultPortSpec(name string) PortSpec {
	return PortSpec{
		Name: name, MAC: DeriveMAC(name), Segment: DefaultSegment, Persistent: true, Offload: true,
		Hardware: vnic.DefaultHardware(), Settings: vnic.DefaultSettings(),
	}
}

// DeriveMAC returns the MAC a port named name gets when its spec gives none: a locally
// administered unicast address made from a hash of the name, so it is the same on every start
// and on every host, and differs between names.
func DeriveMAC(name string) net.HardwareAddr {
	sum := sha256.Sum256([]byte("manad port " + name))
	mac := net.HardwareAddr(sum[:6:6])
	mac[0] = mac[0]&^0x01 | 0x02 // clear the group bit, set the locally administered bit
	return mac
}

// Config returns the port's fixed configuration as the port model takes it: its Hardware as it
// is, its name and starting RSS key. The daemon fills in Lock, Host, Wire and Logger.
func (s *PortSpec) Config() vnic.Config {
	return vnic.Config{Name: s.Name, Hardware: s.Hardware, RSSKey: append([]byte(nil), s.RSSKey...)}
}

// clone returns a copy that shares no memory with s.
func (s PortSpec) clone() PortSpec {
	s.MAC = append(net.HardwareAddr(nil), s.MAC...)
	if s.RSSKey != nil {
		s.RSSKey = append([]byte(nil), s.RSSKey...)
	}
	if s.NAPIQueues != nil {
		s.NAPIQueues = slices.Clone(s.NAPIQueues)
	}
	return s
}

// NAPIConfigs returns queue index q's NAPI settings to start with, for q below maxQueues.
func (s *PortSpec) NAPIConfigs(maxQueues int) []vnic.NAPIConfig {
	out := make([]vnic.NAPIConfig, maxQueues)
	for q := range out {
		switch {
		case s.NAPIQueues == nil:
			out[q] = s.NAPI
		case q < len(s.NAPIQueues):
			out[q] = s.NAPIQueues[q]
		}
	}
	return out
}

// Validate checks the spec the way Parse checks a [[port]] table: names, MAC, every range the
// port model enforces (so vnic.New cannot refuse a valid spec), the XDP built-in and the MTU it
// allows. Errors: EINVAL, with an extack message naming the port and the field ("port \"eth0\":
// mtu 40 less than the minimum 68"). It does not check uniqueness against other ports.
func (s *PortSpec) Validate() error {
	if ps := s.problems(); len(ps) > 0 {
		return invalid("%s: %s", portLabel(s.Name, -1), ps[0].msg)
	}
	return nil
}

// problem is a validation failure and the field (the file's key) it is about.
type problem struct {
	field string
	msg   string
}

// problems returns every validation failure of s, each with its field.
func (s *PortSpec) problems() []problem {
	var ps []problem
	add := func(field, format string, args ...any) {
		ps = append(ps, problem{field, fmt.Sprintf(format, args...)})
	}
	if err := tap.CheckName(s.Name); err != nil {
		// The TAP's own rule (no '%' templates, which checkIfName lets through for the
		// kernel's devices), so that what passes here also passes tap.Open.
		add("name", "%s", extackText(err))
	}
	if err := tap.CheckMAC(s.MAC); err != nil {
		// The TAP's rule (is_valid_ether_addr), so that what passes here passes tap.Open.
		add("mac", "%s", extackText(err))
	}
	// The port model's rules (vnic.Check), each refusal in the file's words.
	for _, e := range vnic.Check(s.Config(), s.Settings) {
		field, msg := s.modelProblem(e)
		ps = append(ps, problem{field, msg})
	}
	if s.MemoryBudget == 0 || s.MemoryBudget < UnlimitedMemory {
		add("memory_budget", "memory_budget %d invalid (want a positive size or \"unlimited\")", s.MemoryBudget)
	}
	if s.XDP != nil && vnic.BuiltinXDPByName(s.XDP.Name()) != s.XDP {
		add("xdp", "XDP program %q is not a built-in (want %s or none)", s.XDP.Name(), xdpWanted())
	}
	// vnic.CheckCoalesce is the rule (mana_set_coalesce's); it checks rx-cqe-frames first, so
	// an error for the CQE frames alone is that value's, reported in the file's words.
	if c := s.Coalesce.RxCQEFrames; vnic.CheckCoalesce(vnic.Coalesce{RxCQEFrames: c}, s.CQECoalesce8) != nil {
		add("rx_cqe_frames", "rx_cqe_frames %d not supported (want %s)", c, cqeFramesWanted(s.CQECoalesce8))
	} else if err := vnic.CheckCoalesce(s.Coalesce, s.CQECoalesce8); err != nil {
		// Only the state file sets the other coalescing values: the driver's text.
		var e *nlerr.Error
		if errors.As(err, &e) {
			add("coalesce", "coalesce: %s", e.Message)
		} else {
			add("coalesce", "coalesce: %v", err)
		}
	}
	if err := s.NAPI.Check(); err != nil {
		add(napiField(err), "%s", napiKeyText(err))
	}
	for q, c := range s.NAPIQueues {
		if err := c.Check(); err != nil {
			add("napi", "napi of queue %d: %s", q, extackText(err))
		}
	}
	if err := checkSegment(s.Segment); err != "" {
		add("segment", "segment %q %s", s.Segment, err)
	}
	if s.NetNS != "" {
		if err := checkNetNS(s.NetNS); err != "" {
			add("netns", "netns %q %s", s.NetNS, err)
		}
	}
	return ps
}

// normalize rounds the rings up to a power of two, as the port model does (vnic.RoundRing), so
// the spec says what the port will really use.
func (s *PortSpec) normalize() {
	s.RxRing, s.TxRing = vnic.RoundRing(s.RxRing), vnic.RoundRing(s.TxRing)
}

// modelKey returns the file's key of the port model's field m: the key of the schema's row it
// checks (portField.model), or rss_key (the state file's, which has no row).
func modelKey(m vnic.Field) string {
	for _, f := range portFields {
		if f.model == m {
			return f.key
		}
	}
	if m == vnic.FieldRSSKey {
		return "rss_key"
	}
	return string(m)
}

// modelProblem says what the port model refused (e, from vnic.Check) in the file's words: its
// key, the value and the range, the bound named by its key when it is another field's ("mtu
// 9001 greater than max_mtu 9000"), or what the key allows. It returns the key and the message.
func (s *PortSpec) modelProblem(e *vnic.FieldError) (field, msg string) {
	key := modelKey(e.Field)
	switch {
	case e.Field == vnic.FieldPageSize:
		return key, fmt.Sprintf("page_size %d not supported (want %s)", s.PageSize, pageSizesWanted)
	case e.Field == vnic.FieldRule:
		return key, fmt.Sprintf("unknown rule %s (want %s)", s.Rule, rulesWanted())
	case e.Field == vnic.FieldRxAlloc:
		return key, fmt.Sprintf("unknown rx_alloc %s (want %s)", s.RxAlloc, allocsWanted())
	case e.Field == vnic.FieldRSSKey:
		return key, fmt.Sprintf("rss_key has %d bytes, want %d", len(s.RSSKey), vnic.RSSKeySize)
	case e.MaxOf == vnic.FieldXDP:
		// mana_xdp_set: "XDP: mtu:%u too large, mtu_max:%lu"; the xdp key is what lowers it.
		return "xdp", fmt.Sprintf("mtu %d too large for XDP with %d-byte pages (max %d)", e.Value, s.PageSize, e.Max)
	case e.Max < e.Min: // not a range: the model's words
		return key, extackText(e)
	case e.MaxOf == vnic.FieldMSIX:
		// mana_gd_query_max_resources: max_num_queues = num_msix_usable - 1.
		return key, fmt.Sprintf("%s %d greater than %d, the most msix_vectors %d allows (one vector is the hardware channel's)",
			key, e.Value, e.Max, s.MSIXVectors)
	case e.MaxOf != "" && e.Value < e.Min:
		return key, fmt.Sprintf("%s %d less than the minimum %d", key, e.Value, e.Min)
	case e.MaxOf != "":
		return key, fmt.Sprintf("%s %d greater than %s %d", key, e.Value, modelKey(e.MaxOf), e.Max)
	case strings.HasPrefix(extackText(e), key+" "):
		// A constant range the model words with the file's key already (speed's): its words.
		return key, extackText(e)
	}
	return key, fmt.Sprintf("%s %d out of range %d..%d", key, e.Value, e.Min, e.Max)
}

// portLabel names a port in messages: by name when it has one, else by its position in the file.
func portLabel(name string, index int) string {
	if name != "" || index < 0 {
		return fmt.Sprintf("port %q", name)
	}
	return fmt.Sprintf("port #%d", index+1)
}

// checkIfName mirrors dev_valid_name: 1..IFNAMSIZ-1 bytes, not "." or "..", no '/', ':' or
// whitespace. It returns what is wrong, or "".
func checkIfName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) >= unix.IFNAMSIZ:
		return fmt.Sprintf("is longer than %d bytes", unix.IFNAMSIZ-1)
	case name == "." || name == "..":
		return "is not a valid interface name"
	case strings.ContainsFunc(name, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) || r == 0 }):
		return "is not a valid interface name (no '/', ':' or whitespace)"
	}
	return ""
}

// checkNetNS accepts what `ip netns add` does: a file name under /run/netns.
func checkNetNS(name string) string {
	switch {
	case len(name) > 255:
		return "is longer than 255 bytes"
	case name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
		return "is not a valid network namespace name (a file name in /run/netns)"
	}
	return ""
}

// checkSegment accepts 1..64 letters, digits, '.', '_' and '-'.
func checkSegment(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > MaxSegmentName:
		return fmt.Sprintf("is longer than %d bytes", MaxSegmentName)
	case strings.ContainsFunc(name, func(r rune) bool { return r > unicode.MaxASCII || !(isBareKeyChar(byte(r)) || r == '.') }):
		return "may only hold letters, digits, '.', '_' and '-'"
	}
	return ""
}

// cqeFramesWanted lists the rx_cqe_frames values a port allows (mana_set_coalesce's rule).
func cqeFramesWanted(cqe8 bool) string {
	if cqe8 {
		return "1, 4 or 8"
	}
	return "1 or 4, or 8 with cqe_coalesce_8"
}

const pageSizesWanted = `4096, 16384 or 65536, or "4K", "16K", "64K"`

func rulesWanted() string {
	names := make([]string, len(rxbuf.Rules))
	for i, r := range rxbuf.Rules {
		names[i] = r.String()
	}
	return orList(names)
}

func allocsWanted() string {
	names := make([]string, len(rxbuf.Allocs))
	for i, a := range rxbuf.Allocs {
		names[i] = a.String()
	}
	return orList(names)
}

// parseXDP reads an xdp value, a built-in program's name, as the configuration file's key does:
// "" is no program. Errors: EINVAL with the file's message (xdpProblem).
func parseXDP(name string) (vnic.XDPProgram, error) {
	if name == "" {
		return nil, nil
	}
	if p := vnic.BuiltinXDPByName(name); p != nil {
		return p, nil
	}
	return nil, invalid("%s", xdpProblem(name))
}

// xdpProblem says what is wrong with an xdp value parseXDP refused.
func xdpProblem(name string) string {
	return fmt.Sprintf("unknown XDP built-in %q (want %s or \"\")", name, xdpWanted())
}

// xdpName is how a port's program is named in the file, the state file and a port's reply:
// "" for none.
func xdpName(p vnic.XDPProgram) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

func xdpWanted() string {
	var names []string
	for _, a := range []vnic.XDPAction{vnic.XDPPass, vnic.XDPDrop, vnic.XDPTx, vnic.XDPAborted} {
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// orList returns "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// parseMemory parses a memory_budget string: "unlimited", or a whole number with an optional
// binary unit ("512MiB", "2G", "1048576"), as manactl does (bytesize).
func parseMemory(s string) (int64, bool) { return bytesize.Parse(s) }

// FormatMemory returns b the way the configuration file would write it: "unlimited", or bytes
// with the largest exact binary unit ("2GiB", "1536MiB", "1000").
func FormatMemory(b int64) string { return bytesize.Format(b) }

// ParseRxAlloc reads an rx_alloc value ("page-pool-frag", "page-pool-page" or "no-pool") for the
// port named port, as the configuration file's key does: "" is the default (the rule's choice).
// Errors: EINVAL with the file's message ("port \"eth0\": unknown rx_alloc \"slab\" (want …)").
func ParseRxAlloc(port, s string) (rxbuf.Alloc, error) {
	if s == "" {
		return rxbuf.AllocPagePoolFrag, nil
	}
	a, err := rxbuf.ParseAlloc(s)
	if err != nil {
		return 0, invalid("%s: %s", portLabel(port, -1), rxAllocProblem(s))
	}
	return a, nil
}

// rxAllocProblem says what is wrong with an rx_alloc value rxbuf.ParseAlloc refused.
func rxAllocProblem(s string) string {
	return fmt.Sprintf("unknown rx_alloc %q (want %s)", s, allocsWanted())
}

// extackText is err's message without the errno text: the configuration's messages say what
// is wrong in words, and file:line says where.
func extackText(err error) string {
	var e *nlerr.Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

// napiField names the file's key of a NAPIConfig.Check error.
func napiField(err error) string {
	msg := extackText(err)
	switch {
	case strings.HasPrefix(msg, "gro-flush-timeout"):
		return "gro_flush_timeout"
	case strings.HasPrefix(msg, "irq-suspend-timeout"):
		return "irq_suspend_timeout"
	}
	return "napi_defer_hard_irqs"
}

// napiKeyText is a NAPIConfig.Check error in the file's words: its key names, not napi-set's.
func napiKeyText(err error) string {
	msg := extackText(err)
	for _, r := range [][2]string{{"defer-hard-irqs", "napi_defer_hard_irqs"}, {"gro-flush-timeout", "gro_flush_timeout"},
		{"irq-suspend-timeout", "irq_suspend_timeout"}} {
		if rest, ok := strings.CutPrefix(msg, r[0]); ok {
			return r[1] + rest
		}
	}
	return msg
}
