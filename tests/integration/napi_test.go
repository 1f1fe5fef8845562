package integration

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

// napiShown is one entry of manactl --json napi show.
type napiShown struct {
	ID                  uint32 `json:"id"`
	Queue               *int   `json:"queue"`
	DeferHardIRQs       uint32 `json:"defer_hard_irqs"`
	GROFlushTimeoutNs   uint64 `json:"gro_flush_timeout_ns"`
	IRQSuspendTimeoutNs uint64 `json:"irq_suspend_timeout_ns"`
	Threaded            bool   `json:"threaded"`
}

// TestNAPISettingsPersist: the real manad and manactl in a namespace. A port starts with its
// file's napi_* keys on every queue; manactl napi set changes one queue's NAPI (napi-set), a
// non-admin is refused with EPERM, a channel change that destroys and recreates the queue
// keeps its settings, and a restart of manad brings them back, as napi-get shows them.
func TestNAPISettingsPersist(t *testing.T) {
	_, ctl := harness.Binaries(t)
	name, ns := harness.Name("mnp", "0"), harness.Name("mnp", "")
	dir, err := os.MkdirTemp("", "manad-napi")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755)) // a non-admin user reaches the socket
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nmax_queues = 4\n"+
		"rx_ring = 128\ntx_ring = 128\npersistent = false\nnapi_defer_hard_irqs = 2\ngro_flush_timeout = \"20us\"\n", name, ns)
	d := harness.Start(t, dir, "max_pollers = 0\n", ports, ns)
	harness.Run(t, ns, "ip", "link", "set", name, "up")

	show := func() []napiShown {
		t.Helper()
		out := harness.Run(t, ns, ctl, "--socket", d.Socket, "--json", "napi", "show", name)
		var ns []napiShown
		require.NoError(t, json.Unmarshal([]byte(out), &ns), "%s", out)
		return ns
	}
	queues := func(want int) []napiShown {
		t.Helper()
		var got []napiShown
		harness.Eventually(t, fmt.Sprintf("%d NAPIs on %s", want, name), func() bool { got = show(); return len(got) == want })
		for i, n := range got {
			require.NotNil(t, n.Queue, "NAPI %d polls no queue", n.ID)
			require.Equal(t, i, *n.Queue, "NAPIs in queue order")
		}
		return got
	}
	file := napiShown{DeferHardIRQs: 2, GROFlushTimeoutNs: 20_000}
	same := func(t *testing.T, want, got napiShown, what string) {
		t.Helper()
		want.ID, want.Queue = got.ID, got.Queue
		assert.Equal(t, want, got, what)
	}
	for _, n := range queues(2) {
		same(t, file, n, "the file's keys")
	}

	harness.Run(t, ns, ctl, "--socket", d.Socket, "napi", "set", name, "--queue", "1", "--defer-hard-irqs", "7", "--irq-suspend-timeout", "1ms", "--threaded", "on")
	q1 := napiShown{DeferHardIRQs: 7, GROFlushTimeoutNs: 20_000, IRQSuspendTimeoutNs: 1_000_000, Threaded: true}
	got := queues(2)
	same(t, file, got[0], "queue 0 as the file set it")
	same(t, q1, got[1], "queue 1 after napi set")

	out, err := harness.RunErr(ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		ctl, "--socket", d.Socket, "napi", "set", name, "--defer-hard-irqs", "0")
	require.Error(t, err, "a non-admin's napi set: %s", out)
	assert.Contains(t, out, "Operation not permitted")
	out, err = harness.RunErr(ns, ctl, "--socket", d.Socket, "napi", "set", name, "--id", "1", "--defer-hard-irqs", "0")
	require.Error(t, err)
	assert.Contains(t, out, "no such file or directory")

	// A channel change destroys queue 1's NAPI and creates a new one: the settings stay.
	old1 := got[1].ID
	harness.Run(t, ns, ctl, "--socket", d.Socket, "set-channels", name, "combined", "1")
	queues(1)
	harness.Run(t, ns, ctl, "--socket", d.Socket, "set-channels", name, "combined", "2")
	got = queues(2)
	assert.NotEqual(t, old1, got[1].ID, "a new NAPI")
	same(t, q1, got[1], "queue 1 after the channel change")

	d.Stop()
	d.Restart()
	harness.Run(t, ns, "ip", "link", "set", name, "up")
	got = queues(2)
	same(t, file, got[0], "queue 0 after the restart")
	same(t, q1, got[1], "queue 1 after the restart")

	text := harness.Run(t, ns, ctl, "--socket", d.Socket, "napi", "show", name)
	assert.True(t, strings.HasPrefix(text, "NAPIs of "+name+":\nID"), "%s", text)
	assert.Contains(t, text, "7                20µs               1ms                  on")
}

// TestNAPISetMatchesVeth: the same napi-set requests sent to the kernel for a veth's NAPI and
// to the real manad for a port's NAPI, in one namespace, are answered alike (success, or the
// same errno: an unknown id, a defer-hard-irqs beyond S32_MAX), and napi-get then reports the
// same settings on both, threaded included (the kernel's NAPI then has a thread, whose pid
// napi-get adds; a manad queue's reader is a goroutine, so manad's has none).
func TestNAPISetMatchesVeth(t *testing.T) {
	name, ns := harness.Name("mnv", "0"), harness.Name("mnv", "")
	ports := fmt.Sprintf("[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 2\nrx_ring = 128\ntx_ring = 128\npersistent = false\n", name, ns)
	d := harness.Start(t, "", "", ports, ns)
	harness.Run(t, ns, "ip", "link", "set", name, "up")
	harness.Run(t, ns, "ip", "link", "add", "nv0", "numrxqueues", "2", "numtxqueues", "2", "type", "veth",
		"peer", "name", "nv1", "numrxqueues", "2", "numtxqueues", "2")
	harness.Run(t, ns, "ip", "link", "set", "nv0", "up")
	harness.Run(t, ns, "ip", "link", "set", "nv1", "up")
	harness.Run(t, ns, "ethtool", "-K", "nv0", "gro", "on") // a veth has NAPIs with GRO (or XDP)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var kc *client.Client
	require.NoError(t, harness.InNetNS(ns, func() (err error) { kc, err = client.DialKernel(); return err }))
	defer kc.Close()
	mc := d.Client(ns)
	ifindex := func(dev string) uint32 {
		var i uint32
		out := harness.Run(t, ns, "ip", "-o", "link", "show", dev)
		_, err := fmt.Sscanf(out, "%d:", &i)
		require.NoError(t, err, "%s", out)
		return i
	}
	type side struct {
		name string
		c    *client.Client
		ifi  uint32
		id   uint32
	}
	sides := []*side{{name: "kernel", c: kc, ifi: ifindex("nv0")}, {name: "manad", c: mc, ifi: ifindex(name)}}
	harness.Eventually(t, "NAPIs on the veth and the port", func() bool {
		for _, s := range sides {
			list, err := s.c.NAPIs(ctx, s.ifi)
			if err != nil || len(list) == 0 {
				return false
			}
			s.id = slices.MinFunc(list, func(a, b wire.NetdevNAPI) int { return cmp.Compare(a.ID, b.ID) }).ID
		}
		return true
	})
	settings := func(s *side) wire.NetdevNAPI {
		t.Helper()
		list, err := s.c.NAPIs(ctx, s.ifi)
		require.NoError(t, err, s.name)
		for _, n := range list {
			if n.ID == s.id {
				n.ID, n.Ifindex = 0, 0
				return n
			}
		}
		t.Fatalf("%s: NAPI %d gone", s.name, s.id)
		return wire.NetdevNAPI{}
	}
	u32 := func(v uint32) *uint32 { return &v }
	dur := func(v time.Duration) *time.Duration { return &v }
	on, off := true, false
	for _, tc := range []struct {
		name string
		set  wire.NetdevNAPISet
		id   uint32 // 0: the side's NAPI
		want syscall.Errno
	}{
		{"defer and gro", wire.NetdevNAPISet{DeferHardIRQs: u32(2), GROFlushTimeout: dur(200 * time.Microsecond)}, 0, 0},
		{"irq-suspend beyond 32 bits of ns", wire.NetdevNAPISet{IRQSuspendTimeout: dur(10 * time.Second)}, 0, 0},
		{"defer max", wire.NetdevNAPISet{DeferHardIRQs: u32(math.MaxInt32)}, 0, 0},
		{"defer beyond S32_MAX", wire.NetdevNAPISet{DeferHardIRQs: u32(math.MaxInt32 + 1)}, 0, syscall.ERANGE},
		{"unknown id", wire.NetdevNAPISet{DeferHardIRQs: u32(1)}, math.MaxUint32 - 1, syscall.ENOENT},
		{"threaded on", wire.NetdevNAPISet{Threaded: &on}, 0, 0},
		{"threaded off", wire.NetdevNAPISet{Threaded: &off}, 0, 0},
		{"back to 0", wire.NetdevNAPISet{DeferHardIRQs: u32(0), GROFlushTimeout: dur(0), IRQSuspendTimeout: dur(0)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []wire.NetdevNAPI
			for _, s := range sides {
				id := cmp.Or(tc.id, s.id)
				err := s.c.NAPISet(ctx, id, tc.set)
				if tc.want == 0 {
					require.NoError(t, err, s.name)
				} else {
					require.ErrorIs(t, err, tc.want, s.name)
				}
				got = append(got, settings(s))
			}
			assert.Equal(t, got[0], got[1], "napi-get after napi-set (kernel, manad)")
		})
	}
}
