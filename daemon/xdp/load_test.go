package xdp

import (
	"bytes"
	"debug/elf"
	"runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/xdp/xdptest"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic"
)

// elfProg is one program of a hand-built BPF object.
func elfProg(section, name string, insns asm.Instructions) xdptest.Prog {
	return xdptest.Prog{Section: section, Name: name, Insns: insns}
}

// buildELF is xdptest.BuildELF for tests.
func buildELF(t testing.TB, machine elf.Machine, license string, progs ...xdptest.Prog) []byte {
	t.Helper()
	obj, err := xdptest.BuildELF(machine, license, progs...)
	require.NoError(t, err)
	return obj
}

// progUncheckedRead reads the packet without a bounds check: the verifier must reject it.
func progUncheckedRead() asm.Instructions {
	return asm.Instructions{
		asm.LoadMem(asm.R2, asm.R1, mdData, asm.Word),
		asm.LoadMem(asm.R0, asm.R2, 12, asm.Half),
		asm.Return(),
	}
}

// TestBuildELFIsValidELF checks the test's object writer against the standard library's reader,
// so that Load failures below are Load's and not the writer's.
func TestBuildELFIsValidELF(t *testing.T) {
	obj := buildELF(t, elf.EM_BPF, "GPL",
		elfProg("xdp", "drop_udp_9", progDropUDPPort(9)),
		elfProg("tc", "cls", progConst(0)),
		elfProg("tc", "cls2", progConst(0)),
	)
	f, err := elf.NewFile(bytes.NewReader(obj))
	require.NoError(t, err, "debug/elf refuses the object")
	syms, err := f.Symbols()
	require.NoError(t, err)
	var got []string
	for _, s := range syms {
		got = append(got, f.Sections[s.Section].Name+"/"+s.Name)
	}
	assert.Equal(t, "xdp/drop_udp_9 tc/cls tc/cls2", strings.Join(got, " "), "symbols %q", got)
	assert.Equal(t, elf.EM_BPF, f.Machine, "machine %v, license section %v", f.Machine, f.Section("license"))
	assert.NotNil(t, f.Section("license"), "machine %v, license section %v", f.Machine, f.Section("license"))
}

func TestLoadValidObject(t *testing.T) {
	testenv.RequireRoot(t)
	obj := buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "drop_udp_9", progDropUDPPort(9)))
	for _, tc := range []struct {
		section, name, wantName string
	}{
		{"", "", "ebpf:drop_udp_9"},
		{"xdp", "", "ebpf:drop_udp_9"},
		{"xdp", "filter.o", "ebpf:filter.o"},
	} {
		p, err := Load(obj, tc.section, tc.name)
		require.NoError(t, err, "Load(section %q)", tc.section)
		assert.Equal(t, tc.wantName, p.Name(), "Name()")
		for _, fc := range []struct {
			frame []byte
			want  vnic.XDPAction
		}{
			{udpFrame(300, 1, 9), vnic.XDPDrop},
			{udpFrame(300, 1, 53), vnic.XDPPass},
		} {
			act, _, _, err := runOn(p, 0, fc.frame)
			if err != nil || act != fc.want {
				t.Errorf("loaded program: %v, %v; want %v", act, err, fc.want)
			}
		}
		assert.NoError(t, p.Close(), "Close")
	}
}

func TestLoadPicksProgram(t *testing.T) {
	testenv.RequireRoot(t)
	obj := buildELF(t, elf.EM_BPF, "GPL",
		elfProg("xdp/pass_all", "pass_all", progConst(vnic.XDPPass)),
		elfProg("xdp/drop_all", "drop_all", progConst(vnic.XDPDrop)),
		elfProg("tc", "cls", progConst(0)),
		elfProg("tc", "cls2", progConst(0)),
	)
	for _, tc := range []struct {
		section string
		want    vnic.XDPAction
		errno   unix.Errno
		msg     string
	}{
		{section: "xdp/pass_all", want: vnic.XDPPass},
		{section: "xdp/drop_all", want: vnic.XDPDrop},
		{section: "", errno: unix.EINVAL, msg: "2 XDP programs (sections: xdp/drop_all, xdp/pass_all)"},
		{section: "xdp", errno: unix.EINVAL, msg: `no program in section "xdp"`},
		{section: "tc", errno: unix.EINVAL, msg: `section "tc" holds 2 programs (cls, cls2)`},
	} {
		t.Run("section "+tc.section, func(t *testing.T) {
			p, err := Load(obj, tc.section, "")
			if tc.errno != 0 {
				checkLoadError(t, err, tc.errno, tc.msg)
				return
			}
			require.NoError(t, err, "Load")
			defer p.Close()
			if act, _, _, err := runOn(p, 0, udpFrame(64, 1, 2)); err != nil || act != tc.want {
				t.Errorf("Run: %v, %v; want %v", act, err, tc.want)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	testenv.RequireRoot(t)
	valid := buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "pass", progConst(vnic.XDPPass)))
	for _, tc := range []struct {
		name    string
		obj     []byte
		section string
		errno   unix.Errno
		msg     string
	}{
		{"empty", nil, "", unix.EINVAL, "empty BPF object"},
		{"garbage", []byte("this is not an ELF object, just text"), "", unix.EINVAL, "not a valid BPF ELF object"},
		{"truncated", valid[:len(valid)/2], "", unix.EINVAL, "not a valid BPF ELF object"},
		{"oversized", append(bytes.Clone(valid), make([]byte, MaxObjectSize)...), "", unix.E2BIG, "larger than the 4194304-byte limit"},
		{"x86 object", buildELF(t, elf.EM_X86_64, "GPL", elfProg("xdp", "pass", progConst(2))), "", unix.EINVAL, "not a valid BPF ELF object"},
		{"no program", buildELF(t, elf.EM_BPF, "GPL"), "", unix.EINVAL, "contains no program"},
		{"missing section", valid, "xdp/nope", unix.EINVAL, `no program in section "xdp/nope" (sections: xdp)`},
		{"tc program", buildELF(t, elf.EM_BPF, "GPL", elfProg("tc", "cls", progConst(0))), "", unix.EINVAL,
			"program in section tc is not an XDP program (type SchedCLS)"},
		{"tc program named", buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "x", progConst(2)), elfProg("classifier", "cls", progConst(0))),
			"classifier", unix.EINVAL, "program in section classifier is not an XDP program (type SchedCLS)"},
		{"only non-XDP programs", buildELF(t, elf.EM_BPF, "GPL", elfProg("tc", "a", progConst(0)), elfProg("socket", "b", progConst(0))),
			"", unix.EINVAL, "contains no XDP program (sections: socket, tc)"},
		{"devmap program", buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp/devmap", "dm", progConst(2))), "", unix.EINVAL,
			"program in section xdp/devmap is not an RX XDP program (attach type XDPDevMap)"},
		{"verifier rejection", buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "unchecked", progUncheckedRead())), "", unix.EINVAL,
			`BPF verifier rejected program "unchecked": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Load(tc.obj, tc.section, "")
			if err == nil {
				p.Close()
			}
			checkLoadError(t, err, tc.errno, tc.msg)
			t.Logf("%v", err)
		})
	}
}

func TestLoadVerifierLog(t *testing.T) {
	testenv.RequireRoot(t)
	_, err := Load(buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "unchecked", progUncheckedRead())), "", "")
	var le *LoadError
	require.ErrorAs(t, err, &le, "Load: %v, want a *LoadError", err)
	assert.NotEmpty(t, le.VerifierLog, "no verifier log kept")
	// The verdict names the offending access, not the log's preamble.
	assert.Contains(t, le.Err.Message, "invalid access to packet", "message %q does not carry the verifier's verdict; log:\n%s", le.Err.Message, strings.Join(le.VerifierLog, "\n"))
	assert.NotContains(t, le.Err.Message, "\n", "message %q spans several lines", le.Err.Message)
}

// TestLoadWithoutPermission drops CAP_BPF, CAP_SYS_ADMIN, CAP_NET_ADMIN and CAP_PERFMON from one
// locked thread (capabilities are per thread) and loads from it.
func TestLoadWithoutPermission(t *testing.T) {
	testenv.RequireRoot(t)
	obj := buildELF(t, elf.EM_BPF, "GPL", elfProg("xdp", "pass", progConst(vnic.XDPPass)))
	// Load once with the capabilities, so the library's feature probes are settled first.
	p, err := Load(obj, "", "")
	require.NoError(t, err)
	p.Close()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread is discarded with its reduced capabilities.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		for _, c := range []uint{unix.CAP_BPF, unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_PERFMON} {
			data[c/32].Effective &^= 1 << (c % 32)
		}
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		p, err := Load(obj, "", "")
		if err == nil {
			p.Close()
		}
		errc <- err
	}()
	checkLoadError(t, <-errc, unix.EPERM, "not permitted")
}

func checkLoadError(t *testing.T, err error, errno unix.Errno, msg string) {
	t.Helper()
	require.ErrorIs(t, err, errno, "error")
	var m interface{ ExtackMessage() string }
	require.ErrorAs(t, err, &m, "error %v has no extack message", err)
	assert.Contains(t, m.ExtackMessage(), msg, "extack message %q, want it to contain %q", m.ExtackMessage(), msg)
}

// FuzzLoad feeds Load arbitrary bytes: it must return a program or an errno-backed error with a
// message, and never panic. The seeds are the valid and broken objects above.
func FuzzLoad(f *testing.F) {
	testenv.RequireRoot(f)
	valid := buildELF(f, elf.EM_BPF, "GPL", elfProg("xdp", "pass", progConst(vnic.XDPPass)))
	f.Add(valid, "")
	f.Add(valid, "xdp")
	f.Add(valid[:len(valid)-1], "")
	f.Add(buildELF(f, elf.EM_BPF, "", elfProg("tc", "cls", progConst(0))), "")
	f.Add([]byte("\x7fELF"), "")
	f.Fuzz(func(t *testing.T, obj []byte, section string) {
		p, err := Load(obj, section, "")
		if err == nil {
			p.Close()
			return
		}
		var errno unix.Errno
		var m interface{ ExtackMessage() string }
		require.ErrorAs(t, err, &errno, "error %v is not an errno with an extack message", err)
		require.ErrorAs(t, err, &m, "error %v is not an errno with an extack message", err)
		require.NotEqual(t, "", m.ExtackMessage(), "error %v is not an errno with an extack message", err)
	})
}
