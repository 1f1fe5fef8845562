package vnic

import (
	"context"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// reconfig names one kind of reconfiguration and the messages its failures carry.
type reconfig struct {
	op string
	// sameLayout reports that the change cannot alter the running queues, so the new value is
	// only stored (mana_set_priv_flags' shortcut). nil means the queues are always rebuilt.
	sameLayout func(old, new Settings) bool
	// Messages for a failed pre-allocation, detach and attach, as the driver reports them.
	preallocMsg, detachMsg, attachMsg string
}

// reconfigure moves the port from its current settings to nw, following the state machine README
// describes (The port model, Reconfiguration):
//
//	no change                → nil, nothing happens
//	port down or detached    → nw is stored and applied when the port comes up (or by the reset work)
//	same layout (priv flags) → nw is stored, the queues keep running
//	pre-allocate the new rings ── fail → value reverted, port untouched
//	detach                   ── fail → value reverted, pre-allocation freed, port still running
//	attach with the new rings ── fail → value reverted, pre-allocation freed, port left detached,
//	                              the reset work re-attaches the last good settings
//
// The caller has validated nw and holds the configuration lock.
func (p *Port) reconfigure(rc reconfig, nw Settings) error {
	p.assertLocked()
	if p.closed {
		p.observe(rc.op, ReconfigRefused, -1)
		return nlerr.New(unix.ENODEV, "port %s is being removed", p.cfg.Name)
	}
	old := p.set
	if nw == old {
		p.observe(rc.op, ReconfigUnchanged, -1)
		return nil
	}
	p.set = nw
	if !p.running {
		p.observe(rc.op, ReconfigStored, -1)
		p.log.Info("reconfigured (applies when the port comes up)", "op", rc.op, "detached", p.adminUp)
		return nil
	}
	if rc.sameLayout != nil && rc.sameLayout(old, nw) {
		p.observe(rc.op, ReconfigStored, -1)
		p.log.Info("reconfigured (RX layout unaffected, queues kept)", "op", rc.op)
		return nil
	}
	start := time.Now()
	l, err := p.layoutFor(nw)
	if err != nil {
		p.set = old
		p.observe(rc.op, ReconfigRefused, -1)
		return err
	}
	pre, err := p.allocRings(nw, l, true)
	if err != nil {
		p.set = old
		p.observe(rc.op, ReconfigPreallocFailed, time.Since(start))
		p.log.Warn("reconfiguration failed at pre-allocation; port untouched", "op", rc.op, "err", err)
		return nlerr.Wrap(err, unix.ENOMEM, "%s", rc.preallocMsg)
	}
	if err := p.detach(); err != nil {
		p.set = old
		p.free(pre)
		p.observe(rc.op, ReconfigDetachFailed, time.Since(start))
		p.log.Warn("reconfiguration failed at detach; port still running", "op", rc.op, "err", err)
		return nlerr.Wrap(err, unix.EIO, "%s", rc.detachMsg)
	}
	if err := p.attach(nw, pre, true); err != nil {
		p.set = old
		p.free(pre)
		p.scheduleReset()
		p.observe(rc.op, ReconfigAttachFailed, time.Since(start))
		p.log.Warn("reconfiguration failed at attach; port detached, reset scheduled", "op", rc.op, "err", err)
		return nlerr.Wrap(err, unix.ENOMEM, "%s", rc.attachMsg)
	}
	p.free(pre)
	took := time.Since(start)
	p.observe(rc.op, ReconfigApplied, took)
	p.log.Info("reconfigured", "op", rc.op, "layout", p.layout.Reason, "took", took)
	return nil
}

// SetPrivFlags sets the private flags (mana_set_priv_flags). Bit 0 is full-page-rx: one RX buffer
// per page instead of page-pool fragments. The flags are stored even when the port is down; the
// queues are rebuilt only when the layout can change, using the driver's own test (MTU +
// MANA_RXBUF_PAD > PAGE_SIZE/2, or XDP attached, means single-buffer mode is forced anyway). That
// test predates the headroom rule, so on 4K pages at MTU 1459–1714 a flip still rebuilds the
// queues although the layout stays the same, exactly as upstream does.
//
// Errors: EINVAL for unknown bits; ENOMEM (pre-allocation), or the detach/attach failure, with the
// driver's message. Caller holds the configuration lock.
func (p *Port) SetPrivFlags(flags uint32) error {
	p.assertLocked()
	if err := privflag.Check(flags); err != nil {
		return err
	}
	nw := p.set
	nw.PrivFlags = flags
	return p.reconfigure(reconfig{
		op: "priv-flags",
		sameLayout: func(old, new Settings) bool {
			if p.cfg.Rule == rxbuf.RulePreFrag {
				return true // that kernel has no flag: one buffer per page regardless
			}
			return new.MTU+rxbuf.RxBufPad > p.cfg.PageSize/2 || new.XDP != nil
		},
		preallocMsg: "Insufficient memory for new allocations",
		detachMsg:   "mana_detach failed",
		attachMsg:   "mana_attach failed",
	}, nw)
}

// SetMTU changes the MTU (dev_validate_mtu + mana_change_mtu). While an XDP program is attached
// the maximum is MANA_XDP_MTU_MAX. Errors: EINVAL out of range; ENOMEM "Insufficient memory for
// new MTU"; detach/attach failures. Caller holds the configuration lock.
func (p *Port) SetMTU(mtu int) error {
	p.assertLocked()
	if e := p.cfg.checkMTU(mtu, p.set.XDP != nil, false, false); e != nil {
		return e.Err
	}
	nw := p.set
	nw.MTU = mtu
	return p.reconfigure(reconfig{
		op:          "mtu",
		preallocMsg: "Insufficient memory for new MTU",
		detachMsg:   "mana_detach failed",
		attachMsg:   "mana_attach failed",
	}, nw)
}

// SetXDP attaches prog, or detaches the current program when prog is nil (mana_xdp_set). A
// running port rebuilds its queues, since XDP forces one buffer per page with XDP_PACKET_HEADROOM.
// Errors: EOPNOTSUPP "XDP: mtu too large" when the MTU exceeds MANA_XDP_MTU_MAX; ENOMEM
// "XDP: Insufficient memory for tx/rx re-config"; "XDP: Re-config failed at detach|attach".
// Caller holds the configuration lock.
func (p *Port) SetXDP(prog XDPProgram) error {
	p.assertLocked()
	if prog != nil && p.set.MTU > rxbuf.XDPMTUMax(p.cfg.PageSize) {
		p.log.Warn("XDP: mtu too large", "mtu", p.set.MTU, "mtu_max", rxbuf.XDPMTUMax(p.cfg.PageSize))
		return nlerr.New(unix.EOPNOTSUPP, "XDP: mtu too large")
	}
	nw := p.set
	nw.XDP = prog
	return p.reconfigure(reconfig{
		op:          "xdp",
		preallocMsg: "XDP: Insufficient memory for tx/rx re-config",
		detachMsg:   "XDP: Re-config failed at detach",
		attachMsg:   "XDP: Re-config failed at attach",
	}, nw)
}

// SetRings changes the RX and TX ring sizes (mana_set_ringparam). Sizes are rounded up to a power
// of two. Errors: EINVAL "rx:%d less than the min:%d", "tx:%d less than the min:%d",
// "requested ring size exceeds maximum"; ENOMEM "Insufficient memory for new allocations";
// detach/attach failures. Caller holds the configuration lock.
func (p *Port) SetRings(rx, tx int) error {
	p.assertLocked()
	if errs := checkRings(rx, tx); len(errs) > 0 {
		return errs[0].Err
	}
	r, t := RoundRing(rx), RoundRing(tx)
	if r != rx || t != tx {
		p.log.Info("Using nearest power of 2 values", "txq", t, "rxq", r)
	}
	nw := p.set
	nw.RxRing, nw.TxRing = r, t
	return p.reconfigure(reconfig{
		op:          "rings",
		preallocMsg: "Insufficient memory for new allocations",
		detachMsg:   "mana_detach failed",
		attachMsg:   "mana_attach failed",
	}, nw)
}

// SetChannels changes the number of combined channels (mana_set_channels). Errors: EINVAL for 0
// or more than the maximum; ENOMEM "Insufficient memory for new allocations"; detach/attach
// failures. Caller holds the configuration lock.
func (p *Port) SetChannels(n int) error {
	p.assertLocked()
	if e := checkChannels(n, &p.cfg.Hardware, false); e != nil {
		return e.Err
	}
	nw := p.set
	nw.Queues = n
	return p.reconfigure(reconfig{
		op:          "channels",
		preallocMsg: "Insufficient memory for new allocations",
		detachMsg:   "mana_detach failed",
		attachMsg:   "mana_attach failed",
	}, nw)
}

// scheduleReset queues the port's reset work (queue_work on an already-pending item coalesces).
func (p *Port) scheduleReset() {
	p.resetPending = true
	select {
	case p.resetKick <- struct{}{}:
	default:
	}
}

// resetWorker is the per-port reset work: one goroutine, woken by scheduleReset, that retries with
// a doubling backoff until the port runs again, the administrator takes it down, or the port is
// removed. Unlike mana_per_port_queue_reset_work_handler, which gives up after one attempt, it
// keeps trying, so a transient failure never leaves an "up" port without queues.
func (p *Port) resetWorker(ctx context.Context) {
	defer close(p.workerDone)
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.resetKick:
		}
		backoff := p.cfg.ResetBackoffMin
		for attempt := 1; ; attempt++ {
			p.cfg.Lock.Lock()
			done, err := p.resetOnce(attempt)
			p.cfg.Lock.Unlock()
			if done {
				break
			}
			p.log.Warn("reset failed, retrying", "attempt", attempt, "in", backoff, "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, p.cfg.ResetBackoffMax)
		}
	}
}

// resetOnce makes one attempt to bring a detached port back with its current (last good)
// settings. It reports done when nothing is left to do. Caller holds the configuration lock.
func (p *Port) resetOnce(attempt int) (done bool, err error) {
	switch {
	case !p.resetPending || p.closed:
		return true, nil
	case !p.adminUp:
		// An administrative down happened meanwhile: leave the port down (the race §3.4 names).
		p.resetPending = false
		p.log.Info("reset cancelled: port is administratively down")
		return true, nil
	case p.running:
		p.resetPending = false
		return true, nil
	}
	start := time.Now()
	l, err := p.layoutFor(p.set)
	if err == nil {
		var pre *allocation
		if pre, err = p.allocRings(p.set, l, true); err == nil {
			// The port is already detached, so mana_detach is skipped (5b05aa36ee24).
			err = p.attach(p.set, pre, true)
			p.free(pre)
		}
	}
	if err != nil {
		p.resetsFailed++
		if p.cfg.OnReset != nil {
			p.cfg.OnReset(p, err)
		}
		return false, err
	}
	p.resetsOK++
	p.resetPending = false
	p.log.Info("reset restored the port", "attempt", attempt, "took", time.Since(start))
	if p.cfg.OnReset != nil {
		p.cfg.OnReset(p, nil)
	}
	return true, nil
}
