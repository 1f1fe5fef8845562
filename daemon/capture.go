package daemon

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/nlerr"
	"github.com/manad/manad/genl/wire"
)

// StartCapture starts a capture of r.Target: a port by that name the caller can see (one in its
// namespace; for an admin in manad's own namespace, any port, as list shows them), else the wire
// segment by that name. A port and a segment of the same name: the port wins. Errors: ENOENT
// when neither exists; EINVAL for a direction on a segment.
func (b *backend) StartCapture(ctx context.Context, c genl.Caller, r genl.CaptureRequest) (genl.CaptureSource, error) {
	all := false
	if c.Admin {
		self, err := selfNetNS()
		all = err == nil && c.NetNS == self
	}
	snap := r.Snaplen
	if snap == 0 || snap > wire.MaxSnaplen {
		snap = wire.MaxSnaplen
	}
	cfg := datapath.CaptureConfig{Snaplen: int(snap)}
	switch r.Direction {
	case wire.CaptureIn:
		cfg.Dirs = datapath.CaptureIn
	case wire.CaptureOut:
		cfg.Dirs = datapath.CaptureOut
	}
	info := wire.CaptureInfo{Target: r.Target, Snaplen: snap}
	d := b.d()
	d.mu.Lock()
	defer d.mu.Unlock()
	var capt *datapath.Capture
	var err error
	if p, ok := d.ports[r.Target]; ok && p.isReady() && p.ep != nil && (all || p.ns == c.NetNS) {
		info.Kind = wire.CaptureKindPort
		capt, err = p.ep.Capture(cfg)
	} else {
		var seg *datapath.Segment
		for _, s := range d.segments.List() {
			if s.Name() == r.Target {
				seg = s
			}
		}
		if seg == nil {
			return nil, nlerr.New(unix.ENOENT, "no port or segment named %q", r.Target)
		}
		info.Kind = wire.CaptureKindSegment
		capt, err = seg.Capture(cfg)
	}
	if err != nil {
		return nil, err
	}
	return &captureSource{c: capt, info: info}, nil
}

// captureSource is a datapath capture as the netlink server drains it.
type captureSource struct {
	c    *datapath.Capture
	info wire.CaptureInfo
}

func (s *captureSource) Info() wire.CaptureInfo { return s.info }

func (s *captureSource) Recv(ctx context.Context) (genl.CaptureFrame, bool) {
	f, ok := s.c.Recv(ctx)
	return wireFrame(f), ok
}

func (s *captureSource) Poll() (genl.CaptureFrame, bool) {
	f, ok := s.c.Poll()
	return wireFrame(f), ok
}

func (s *captureSource) Stop() { s.c.Stop() }

func (s *captureSource) Ended() string {
	if !s.c.Ended() {
		return ""
	}
	return fmt.Sprintf("port %s is gone", s.info.Target)
}

func (s *captureSource) Stats() genl.CaptureStats {
	st := s.c.Stats()
	return genl.CaptureStats{Matched: st.Matched, Dropped: st.Dropped}
}

func wireFrame(f datapath.CapturedFrame) genl.CaptureFrame {
	dir := wire.CaptureIn
	if f.Dir == datapath.CaptureOut {
		dir = wire.CaptureOut
	}
	return genl.CaptureFrame{Time: uint64(f.Time.UnixNano()), Dir: dir, Member: f.Member, OrigLen: uint32(f.OrigLen), Data: f.Data}
}
