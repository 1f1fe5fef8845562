package daemon

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/vnic"
)

// Persistence: no acknowledgement without it.
//
// A change a client asks for (a SET, port add/del, segment and uplink add/del) is refused before it
// is applied when its state cannot be saved: reserveSave creates and allocates the state file's
// next version (config.Reserve) first, so a read-only or full state directory answers with the file
// system's errno and an extack saying what failed and how to fix it, and the port, segment and
// state file keep what they had. The change is then applied and its state written into the reserved
// blocks (config.Reservation.Commit). Should that write still fail (an I/O error, state.json
// replaced by a directory), the change is undone where it can be (a port just added is removed, a
// port's settings go back: revert) and the reply says so; otherwise (a deletion, a segment or
// uplink change, or undoing failed) the reply says that the change was applied but not saved, and
// the save is retried. Changes made from outside (`ip link set`, a TAP deleted) cannot be refused:
// a save that fails is logged, counted (manad_state_save_failures_total, manad_state_unsaved) and
// retried with backoff until it succeeds, and once more at shutdown.

// Bounds of the backoff between retries of a failed save.
const (
	saveRetryFirst = time.Second
	saveRetryMax   = 30 * time.Second
)

// reserveSave reserves the state file's next write before a change is applied. It returns done,
// which the caller defers with a pointer to its error result: done gives an unused reservation up
// and, when the save of the change failed after it was applied (saveErr holds the cause), sets
// *errp (when still nil) to the error saying so. Nested calls (a reservation is already held)
// reserve nothing and get a done that does nothing. Caller holds the configuration lock.
//
// Errors: an *nlerr.Error with the file system's errno (EROFS, ENOSPC, EDQUOT, EACCES, EPERM,
// else EIO) and a message naming the state file and the fix; the change must then not be made.
func (d *Daemon) reserveSave() (done func(errp *error), err error) {
	if d.saveRes != nil {
		return func(*error) {}, nil
	}
	r, err := config.Reserve(d.cfg.Daemon.StateDir, d.stateSize+config.ReserveSlack)
	if err != nil {
		d.countSaveFailure()
		d.log.Error("change refused: its state cannot be saved", "path", d.statePath(), "err", err)
		return nil, d.saveError(err, "the change was not applied")
	}
	d.saveRes = r
	return func(errp *error) {
		d.saveRes.Abort() // unless the change committed it
		d.saveRes = nil
		if d.saveErr != nil && *errp == nil {
			*errp = d.saveError(d.saveErr, "the change was applied but not saved; manad retries saving it, "+
				"and it is lost if manad stops before a retry succeeds")
		}
		d.saveErr = nil
	}, nil
}

// saveState writes the state file: into the request's reservation when there is one (see
// reserveSave), else on its own. A failure is logged and counted, and the save is retried later
// (retrySave); in a request it is also the request's error (reserveSave's done). Caller holds the
// configuration lock.
func (d *Daemon) saveState() {
	r := d.saveRes
	request := r != nil
	d.saveRes = nil
	var err error
	if r == nil {
		r, err = config.Reserve(d.cfg.Daemon.StateDir, d.stateSize+config.ReserveSlack)
	}
	var n int64
	if err == nil {
		n, err = r.Commit(d.state)
	}
	if err != nil {
		d.saveFailed(err, request)
		return
	}
	d.stateSize = n
	if d.unsaved {
		d.unsaved = false
		d.saveDelay = 0
		if d.saveRetry != nil {
			d.saveRetry.Stop()
			d.saveRetry = nil
		}
		if d.control != nil {
			d.control.SetStateUnsaved(false)
		}
		d.log.Info("state saved again", "path", d.statePath())
	}
}

// saveFailed records a save that failed with err: the state in memory is newer than the file
// until a retry succeeds. For a request's save, the error is the request's too. Caller holds the
// configuration lock.
func (d *Daemon) saveFailed(err error, request bool) {
	d.countSaveFailure()
	d.unsaved = true
	if d.control != nil {
		d.control.SetStateUnsaved(true)
	}
	if request {
		d.saveErr = err
	}
	if d.closing {
		d.log.Error("saving state failed; the last changes are lost", "path", d.statePath(), "err", err)
		return
	}
	if d.saveRetry == nil {
		d.saveDelay = min(max(2*d.saveDelay, saveRetryFirst), saveRetryMax)
		d.saveRetry = time.AfterFunc(d.saveDelay, d.retrySave)
	}
	d.log.Error("saving state failed; retrying", "path", d.statePath(), "err", err, "retry_in", d.saveDelay)
}

// retrySave is the timer of a failed save: it saves again, or schedules the next try.
func (d *Daemon) retrySave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.saveRetry = nil
	if d.closing || !d.unsaved {
		return
	}
	d.saveState()
}

// stopSaveRetry stops the retry timer (shutdown saves one last time itself). Caller holds the
// configuration lock.
func (d *Daemon) stopSaveRetry() {
	if d.saveRetry != nil {
		d.saveRetry.Stop()
		d.saveRetry = nil
	}
}

// countSaveFailure counts a failed save in the metrics.
func (d *Daemon) countSaveFailure() {
	if d.control != nil {
		d.control.StateSaveFailed()
	}
}

func (d *Daemon) statePath() string { return config.StatePath(d.cfg.Daemon.StateDir) }

// saveError is the reply to a request whose state could not be saved: the file system's errno,
// and a message that names the state file, says what happened to the change (outcome) and how
// to fix the cause.
func (d *Daemon) saveError(err error, outcome string) error {
	errno := unix.EIO
	var en unix.Errno
	if errors.As(err, &en) {
		errno = en
	}
	dir := d.cfg.Daemon.StateDir
	var fix string
	switch errno {
	case unix.EROFS:
		fix = fmt.Sprintf("remount the file system of %s read-write, or set state_dir to a writable directory, and retry", dir)
	case unix.ENOSPC, unix.EDQUOT:
		fix = fmt.Sprintf("free space on the file system of %s and retry", dir)
	case unix.EACCES, unix.EPERM:
		fix = fmt.Sprintf("make %s writable by manad (its mode, owner, attributes: lsattr -d) and retry", dir)
	default:
		fix = fmt.Sprintf("check %s and its file system (dmesg) and retry", dir)
	}
	if fi, err := os.Lstat(d.statePath()); err == nil && fi.IsDir() { // rename: EISDIR, or EEXIST on some file systems
		fix = fmt.Sprintf("%s is a directory: remove it, and retry", d.statePath())
	}
	return nlerr.New(errno, "cannot save state to %s: %s; %s: %s", d.statePath(), errno.Error(), outcome, fix)
}

// revert puts back on p the settings of before, a view taken before a change whose state could
// not be saved, so that the port runs what the state file holds: each setting that differs goes
// back through the driver operation that changed it (a request changes one kind). An eBPF program
// replaced by the change cannot come back (it was closed): the port is left without a program
// then. Caller holds the configuration lock.
//
// Errors: the first operation that failed, after trying every one; the port then keeps some of
// the change (and a failed attach is the reset work's, as for any reconfiguration).
func (d *Daemon) revert(p *port, before portView) error {
	var errs []error
	try := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	old, cur := before.set, p.vp.Settings()
	if cur.MTU != old.MTU {
		err := p.vp.SetMTU(old.MTU)
		if err == nil && p.dev != nil {
			err = p.dev.SetMTU(old.MTU)
		}
		try("mtu", err)
	}
	if cur.RxRing != old.RxRing || cur.TxRing != old.TxRing {
		try("rings", p.vp.SetRings(old.RxRing, old.TxRing))
	}
	if cur.Queues != old.Queues {
		try("channels", p.ep.SetChannels(old.Queues, func() error { return p.vp.SetChannels(old.Queues) }))
	}
	if cur.PrivFlags != old.PrivFlags {
		try("priv-flags", p.vp.SetPrivFlags(old.PrivFlags))
	}
	if cur.Coalesce != old.Coalesce {
		try("coalesce", p.vp.SetCoalesce(old.Coalesce))
	}
	if cur.XDP != old.XDP {
		prog := old.XDP
		if prog != nil && (p.ebpf == nil || prog != vnic.XDPProgram(p.ebpf)) && vnic.BuiltinXDPByName(prog.Name()) == nil {
			prog = nil // the eBPF program the change replaced is closed
		}
		err := p.vp.SetXDP(prog)
		if err == nil && p.ebpf != nil && vnic.XDPProgram(p.ebpf) != prog {
			p.ebpf.Close()
			p.ebpf = nil
		}
		try("xdp", err)
	}
	if p.offload() != before.offload {
		try("features", p.ep.SetOffload(before.offload))
		d.syncCarrier(p)
	}
	if p.vp.RSS().Key != before.rssKey {
		try("rss key", p.vp.SetRSS(vnic.RSSUpdate{Key: before.rssKey[:]}))
	}
	if newNAPIView(p.vp.NAPIConfigs()) != before.napi {
		for q, c := range before.napi.configs() {
			if p.vp.NAPIConfig(q) != c {
				try(fmt.Sprintf("napi of queue %d", q), p.vp.SetNAPIConfig(q, c))
			}
		}
	}
	return errors.Join(errs...)
}
