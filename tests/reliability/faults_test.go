package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reconfigOp is a reconfiguration the fault tests drive: it reads a port's current value and
// sets the other one of two values.
type reconfigOp struct {
	name string
	get  func(*genl.PortInfo) string
	flip func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error
	// msgs are the extack messages of a failed pre-allocation, detach and attach, before
	// ": injected <point> fault" (the driver's own messages for that operation).
	msgs [3]string
}

var driverMsgs = [3]string{"Insufficient memory for new allocations", "mana_detach failed", "mana_attach failed"}

var reconfigOps = map[string]reconfigOp{
	"priv-flags": {
		name: "priv-flags",
		get:  func(i *genl.PortInfo) string { return fmt.Sprint(i.PrivFlags & 1) },
		flip: func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error {
			return c.SetPrivateFlags(bg(t), client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: cur.PrivFlags&1 == 0}}})
		},
		msgs: driverMsgs,
	},
	"rings": {
		name: "rings",
		get:  func(i *genl.PortInfo) string { return fmt.Sprint(i.RxRing, i.TxRing) },
		flip: func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error {
			n := uint32(256)
			if cur.RxRing == 256 {
				n = 128
			}
			return c.SetRings(bg(t), ifi, client.RingsUpdate{Rx: &n, Tx: &n})
		},
		msgs: driverMsgs,
	},
	"channels": {
		name: "channels",
		get:  func(i *genl.PortInfo) string { return fmt.Sprint(i.Queues) },
		flip: func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error {
			n := uint32(4)
			if cur.Queues == 4 {
				n = 2
			}
			return c.SetChannels(bg(t), ifi, client.ChannelsUpdate{Combined: &n})
		},
		msgs: driverMsgs,
	},
	"mtu": {
		// The receiving port's MTU only goes up from its peer's 1500: below it, the peer's
		// full-sized frames would be dropped (as on a real link) and the TCP stream stall.
		name: "mtu",
		get:  func(i *genl.PortInfo) string { return fmt.Sprint(i.MTU) },
		flip: func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error {
			n := uint32(1600)
			if cur.MTU == 1600 {
				n = 1500
			}
			return c.SetMTU(bg(t), ifi, n)
		},
		msgs: [3]string{"Insufficient memory for new MTU", "mana_detach failed", "mana_attach failed"},
	},
	"xdp": {
		name: "xdp",
		get:  func(i *genl.PortInfo) string { return i.XDP },
		flip: func(t testing.TB, c *client.Client, ifi client.Interface, cur *genl.PortInfo) error {
			if cur.XDP == "" {
				return c.AttachXDP(bg(t), ifi, genl.XDPProgram{Builtin: "pass"})
			}
			return c.DetachXDP(bg(t), ifi)
		},
		msgs: [3]string{"XDP: Insufficient memory for tx/rx re-config", "XDP: Re-config failed at detach", "XDP: Re-config failed at attach"},
	},
}

var faultPoints = map[string]struct {
	index int
	errno unix.Errno // the point's default errno (vnic: defaultErrno)
}{"prealloc": {0, unix.ENOMEM}, "detach": {1, unix.EIO}, "attach": {2, unix.EPROTO}}

// servingState is what "the port is untouched / restored" means: it runs with the same settings
// and the same RX buffer layout, and no reset is pending.
func servingState(i *genl.PortInfo) string {
	s := settingsOf(i)
	s.Faults = ""
	return fmt.Sprintf("%+v", s)
}

// checkTAP checks that the TAP agrees with the port: same MTU, and (while the port runs) as
// many attached queues as the port has channels.
func checkTAP(t *testing.T, ns string, i *genl.PortInfo, when string) {
	t.Helper()
	mtu, queues := tapState(t, ns, i.Device.Name)
	assert.Equal(t, int(i.MTU), mtu, "%s: TAP %s has MTU %d and %d queues, the port MTU %d and %d channels", when, i.Device.Name, mtu, queues, i.MTU, i.Queues)
	assert.Equal(t, int(i.Queues), queues, "%s: TAP %s has MTU %d and %d queues, the port MTU %d and %d channels", when, i.Device.Name, mtu, queues, i.MTU, i.Queues)
}

// TestFaults arms every fault point (prealloc, detach, attach) in every mode (once, count 3,
// always) on the receiving port of a running TCP stream, runs a reconfiguration into it and
// checks the outcome README names (The port model, Reconfiguration):
//   - prealloc, detach: the request fails with the point's errno and the driver's message; the
//     value is the old one; the port is untouched (running, same layout, no reset, its TAP
//     unchanged) and keeps receiving; after the fault is spent (or turned off) the same request
//     succeeds;
//   - attach: the request fails; the value is the old one; the port is detached and the reset
//     work restores it with the old settings — after exactly N-1 failed reset attempts for
//     "count N", and only once the fault is turned off for "always" (meanwhile the port stays
//     detached with a reset pending and passes no traffic); then traffic resumes.
//
// At the end the stream has arrived intact and no RX buffer is left in flight.
func TestFaults(t *testing.T) {
	nsA, nsB := harness.Name("rfa", ""), harness.Name("rfb", "")
	portB := harness.Name("rf", "b")
	ports := []portDef{
		{name: harness.Name("rf", "a"), ns: nsA, segment: "rf", ip: "10.214.0.1"},
		{name: portB, ns: nsB, segment: "rf", ip: "10.214.0.2"},
	}
	r := startRig(t, "", "", ports)
	c, ifi := r.port(portB)
	waitPing(t, nsA, "10.214.0.2")
	tr, err := harness.StartTransfer(nsA, nsB, "10.214.0.2:5302", 0, 3)
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			tr.Stop()
		}
	}()
	logCount := func(msg string) int {
		// The port attribute ends the line or is followed by more.
		log, key := r.d.Log(), `msg="`+msg+`" port=`+portB
		return strings.Count(log, key+" ") + strings.Count(log, key+"\n")
	}
	receiving := func(when string) {
		t.Helper()
		rx0 := rxPackets(t, c, portB)
		assert.True(t, poll(10*time.Second, func() bool { return rxPackets(t, c, portB) > rx0 }), "%s: port %s received nothing in 10s", when, portB)
	}

	cases := []struct {
		point, mode string
		count       uint32
		op          string
	}{
		{"prealloc", "once", 0, "priv-flags"},
		{"prealloc", "count", 3, "rings"},
		{"prealloc", "always", 0, "channels"},
		{"detach", "once", 0, "mtu"},
		{"detach", "count", 3, "xdp"},
		{"detach", "always", 0, "rings"},
		{"attach", "once", 0, "channels"},
		{"attach", "once", 0, "mtu"},
		{"attach", "count", 3, "xdp"},
		{"attach", "count", 2, "rings"},
		{"attach", "always", 0, "priv-flags"},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s %s", tc.point, tc.mode)
		if tc.mode == "count" {
			name = fmt.Sprintf("%s count %d", tc.point, tc.count)
		}
		name += " during " + tc.op
		op, fp := reconfigOps[tc.op], faultPoints[tc.point]
		wantMsg := op.msgs[fp.index] + ": injected " + tc.point + " fault"
		t.Run(name, func(t *testing.T) {
			before := portInfo(t, c, portB)
			v0 := op.get(before)
			require.NoError(t, c.SetFault(bg(t), ifi, genl.Fault{Point: tc.point, Mode: tc.mode, Count: tc.count}))
			armed := portInfo(t, c, portB).Faults
			wantArmed := genl.Fault{Point: tc.point, Mode: tc.mode, Count: tc.count, Errno: uint32(fp.errno)}
			if len(armed) != 3 || armed[fp.index] != wantArmed {
				t.Errorf("armed faults %+v, want %+v at index %d", armed, wantArmed, fp.index)
			}
			failures := map[string]int{"once": 1, "count": int(tc.count), "always": 3}[tc.mode]
			failOnce := func(k int) {
				t.Helper()
				err := op.flip(t, c, ifi, before)
				require.Equal(t, fp.errno, errnoOf(err), "attempt %d: %v, want %v %q", k, err, fp.errno, wantMsg)
				require.Equal(t, wantMsg, extackOf(err), "attempt %d: %v, want %v %q", k, err, fp.errno, wantMsg)
				got := op.get(portInfo(t, c, portB))
				assert.Equal(t, v0, got, "attempt %d: %s is %s after the failure, want the old %s", k, op.name, got, v0)
			}

			if tc.point != "attach" {
				for k := 1; k <= failures; k++ {
					failOnce(k)
					after := portInfo(t, c, portB)
					assert.Equal(t, servingState(before), servingState(after), "attempt %d: port touched by a failed %s:\nbefore %s\nafter  %s", k, tc.point, servingState(before), servingState(after))
					checkTAP(t, nsB, after, fmt.Sprintf("attempt %d", k))
					receiving(fmt.Sprintf("after failed attempt %d", k))
				}
				if tc.mode == "always" {
					require.NoError(t, c.SetFault(bg(t), ifi, genl.Fault{Point: tc.point, Mode: "off"}))
				}
			} else {
				failed0, restored0 := logCount("reset attempt failed"), logCount("reset restored service")
				failOnce(1)
				if tc.mode == "always" {
					require.True(t, poll(10*time.Second, func() bool { return logCount("reset attempt failed") >= failed0+2 }), "the reset work did not retry: %d failed attempts logged", logCount("reset attempt failed")-failed0)
					i := portInfo(t, c, portB)
					if !i.AdminUp || i.Running || !i.Detached || !i.ResetPending || op.get(i) != v0 {
						t.Errorf("while attach keeps failing: admin up %v running %v detached %v reset pending %v, %s %s",
							i.AdminUp, i.Running, i.Detached, i.ResetPending, op.name, op.get(i))
					}
					assert.False(t, pingOnce(nsA, "10.214.0.2"), "a detached port answered a ping")
					require.NoError(t, c.SetFault(bg(t), ifi, genl.Fault{Point: tc.point, Mode: "off"}))
				}
				require.True(t, poll(20*time.Second, func() bool { return logCount("reset restored service") > restored0 }), "the reset work did not restore the port")
				after := portInfo(t, c, portB)
				assert.Equal(t, servingState(before), servingState(after), "restored port differs from the last good one:\nbefore %s\nafter  %s", servingState(before), servingState(after))
				failedResets := logCount("reset attempt failed") - failed0
				switch tc.mode {
				case "once", "count":
					want := failures - 1
					assert.Equal(t, want, failedResets, "%d failed reset attempts, want %d", failedResets, want)
				case "always":
					t.Logf("%d failed reset attempts before the fault was turned off", failedResets)
				}
				n := logCount("reset restored service") - restored0
				assert.Equal(t, 1, n, "the reset work restored the port %d times, want once", n)
				checkTAP(t, nsB, after, "after the reset")
				receiving("after the reset")
				waitPing(t, nsA, "10.214.0.2")
			}

			require.NoError(t, op.flip(t, c, ifi, before), "%s once the fault is spent", op.name)
			after := portInfo(t, c, portB)
			if op.get(after) == v0 || !after.Running || after.Detached {
				t.Errorf("after the successful %s: %s %s, running %v detached %v", op.name, op.name, op.get(after), after.Running, after.Detached)
			}
			for _, f := range after.Faults {
				assert.Equal(t, "off", f.Mode, "fault still armed: %+v", f)
			}
			checkTAP(t, nsB, after, "after the successful change")
			receiving("after the successful change")
		})
	}
	tr.Stop()
	stopped = true
	if err := tr.Check(); err != nil {
		t.Errorf("TCP stream through the faults: %v", err)
	} else {
		t.Logf("TCP stream through the faults: %d MiB intact", tr.Sent>>20)
	}
	if !poll(10*time.Second, func() bool { return portInfo(t, c, portB).BuffersInFlight == 0 }) {
		t.Errorf("%d RX buffers in flight after the stream stopped", portInfo(t, c, portB).BuffersInFlight)
	}
}

// portTuple is what the kill -9 test reconfigures.
type portTuple struct{ Flags, Rx, Tx, Queues, MTU uint32 }

func tupleOf(i *genl.PortInfo) portTuple {
	return portTuple{i.PrivFlags & 1, i.RxRing, i.TxRing, i.Queues, i.MTU}
}

// flipper reconfigures one port in a loop (private flag, rings, channels, MTU in turn) until a
// request fails, remembering the settings of the last acknowledged change and the change in
// flight.
type flipper struct {
	mu       sync.Mutex
	acked    portTuple
	inflight *portTuple
	flips    int
	err      error // a netlink error: must not happen
}

func (f *flipper) run(ctx context.Context, c *client.Client, ifi client.Interface) {
	for i := 0; ; i++ {
		f.mu.Lock()
		next := f.acked
		f.mu.Unlock()
		switch i % 4 {
		case 0:
			next.Flags ^= 1
		case 1:
			next.Rx, next.Tx = 384-next.Rx, 384-next.Tx // 128 <-> 256
		case 2:
			next.Queues = 6 - next.Queues // 2 <-> 4
		case 3:
			next.MTU = 3100 - next.MTU // 1500 <-> 1600
		}
		f.mu.Lock()
		f.inflight = &next
		f.mu.Unlock()
		var err error
		switch i % 4 {
		case 0:
			err = c.SetPrivateFlags(ctx, client.PrivateFlags{Interface: ifi, Flags: []client.Flag{{Name: "full-page-rx", On: next.Flags == 1}}})
		case 1:
			err = c.SetRings(ctx, ifi, client.RingsUpdate{Rx: &next.Rx, Tx: &next.Tx})
		case 2:
			err = c.SetChannels(ctx, ifi, client.ChannelsUpdate{Combined: &next.Queues})
		case 3:
			err = c.SetMTU(ctx, ifi, next.MTU)
		}
		f.mu.Lock()
		if err == nil {
			f.acked, f.inflight = next, nil
			f.flips++
		} else if !connectionLost(err) {
			f.err = err
		}
		f.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// connectionLost reports an error that means the daemon went away (the client reports the
// socket's errno like an answer's), as opposed to an answer refusing the request.
func connectionLost(err error) bool {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return true // EOF and friends are not wrapped as answers
	}
	switch errnoOf(err) {
	case unix.ECONNRESET, unix.EPIPE, unix.ENOTCONN, unix.ECONNREFUSED:
		return ce.Message == ""
	}
	return false
}

// TestKill9DuringReconfig kills manad with SIGKILL 20 times, each at a random moment while a
// client reconfigures a port in a loop, and restarts it: every port must come back consistent —
// settings those of the last acknowledged change or of the one in flight, never anything else;
// running, not detached, no reset pending; its TAP with the same MTU and queue count — with its
// addresses intact and traffic flowing.
func TestKill9DuringReconfig(t *testing.T) {
	const rounds = 20
	nsA, nsB := harness.Name("rka", ""), harness.Name("rkb", "")
	portA, portB := harness.Name("rk", "a"), harness.Name("rk", "b")
	ports := []portDef{
		{name: portA, ns: nsA, segment: "rk", ip: "10.215.0.1"},
		{name: portB, ns: nsB, segment: "rk", ip: "10.215.0.2"},
	}
	r := startRig(t, "", "", ports)
	c, ifi := r.port(portB)
	require.NoError(t, c.SetChannels(bg(t), ifi, client.ChannelsUpdate{Combined: ptr(uint32(2))}))
	waitPing(t, nsA, "10.215.0.2")
	ca, _ := r.port(portA)
	wantA := servingState(portInfo(t, ca, portA))
	rng := rand.New(rand.NewPCG(81, 82))

	old, newer, none := 0, 0, 0
	for round := 1; round <= rounds; round++ {
		c, ifi = r.port(portB)
		f := &flipper{acked: tupleOf(portInfo(t, c, portB))}
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.run(bg(t), c, ifi)
		}()
		delay := time.Duration(20+rng.IntN(300)) * time.Millisecond
		time.Sleep(delay)
		r.d.Kill9()
		<-done
		require.NoError(t, f.err, "round %d: a reconfiguration failed with a netlink error", round)
		for _, p := range ports {
			require.Contains(t, harness.Run(t, p.ns, "ip", "-4", "addr", "show", "dev", p.name), p.ip+"/24", "round %d: %s lost its address while manad was dead", round, p.name)
		}

		r.d.Restart()
		r.connect(t)
		c, _ = r.port(portB)
		var info *genl.PortInfo
		settled := poll(20*time.Second, func() bool {
			// Right after the restart the port may not be registered yet (ENODEV).
			i, err := c.Port(bg(t), ifi)
			if err != nil {
				return false
			}
			info = i
			return i.AdminUp && i.Running && !i.Detached && !i.ResetPending
		})
		require.True(t, settled, "round %d: port %s did not settle after the restart: %+v", round, portB, info)
		got := tupleOf(info)
		switch {
		case got == f.acked:
			old++
		case f.inflight != nil && got == *f.inflight:
			newer++
		default:
			t.Errorf("round %d: after the restart %s has %+v; the last acknowledged change left %+v, the one in flight %+v",
				round, portB, got, f.acked, f.inflight)
		}
		if f.inflight == nil {
			none++
		}
		checkTAP(t, nsB, info, fmt.Sprintf("round %d", round))
		ca, _ = r.port(portA)
		assert.Equal(t, wantA, servingState(portInfo(t, ca, portA)), "round %d: port %s changed across the crash:\nwant", round, portA)
		for _, p := range ports {
			assert.Contains(t, harness.Run(t, p.ns, "ip", "-4", "addr", "show", "dev", p.name), p.ip+"/24", "round %d: %s lost its address across the restart", round, p.name)
		}
		waitPing(t, nsA, "10.215.0.2")
		t.Logf("round %d: killed after %v and %d acknowledged changes; restored %s", round, delay, f.flips,
			map[bool]string{true: "the last acknowledged settings", false: "the settings of the change in flight"}[got == f.acked])
	}
	t.Logf("%d rounds: %d restored the last acknowledged settings, %d the change in flight (%d kills found no change in flight)", rounds, old, newer, none)
	// A kill while the state file was being written must leave the old or the new file, never
	// one manad has to give up on (it would then start from the configuration alone).
	n := strings.Count(r.d.Log(), "state file unusable")
	assert.Equal(t, 0, n, "manad found its state file unusable after %d of the kills", n)
}
