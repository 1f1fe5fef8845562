package genl

import (
	"context"
	"testing"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// viewsBackend records the views asked of it.
type viewsBackend struct {
	asked []NetdevView
	full  int
}

func (b *viewsBackend) NetdevPort(context.Context, Caller, Device) (NetdevPort, error) {
	b.full++
	return NetdevPort{}, nil
}

func (b *viewsBackend) NetdevViews(_ context.Context, _ Caller, _ Device, want NetdevView) (NetdevPort, error) {
	b.asked = append(b.asked, want)
	return NetdevPort{}, nil
}

// fullOnlyBackend has NetdevPort only.
type fullOnlyBackend struct {
	full int
}

func (b *fullOnlyBackend) NetdevPort(context.Context, Caller, Device) (NetdevPort, error) {
	b.full++
	return NetdevPort{}, nil
}

// TestNetdevViewOf: each netdev command asks a Backend with NetdevViews for the views its answers come
// from, and nothing else; a backend without NetdevViews is asked for the whole NetdevPort.
func TestNetdevViewOf(t *testing.T) {
	// scope is a qstats-get's scope attribute of value v (NLA_UINT, 4 bytes).
	scope := func(v byte) []nlattr.Attr {
		as := make([]nlattr.Attr, wire.NetdevAQStatsScope+1)
		as[wire.NetdevAQStatsScope] = nlattr.Attr{Raw: wire.NetdevAQStatsScope, Off: 20, Data: []byte{v, 0, 0, 0}}
		return as
	}
	for _, tc := range []struct {
		cmd   uint8
		attrs []nlattr.Attr
		want  NetdevView
	}{
		{wire.NetdevCmdDevGet, nil, NetdevViewDev},
		{wire.NetdevCmdQueueGet, nil, NetdevViewQueues},
		{wire.NetdevCmdNAPIGet, nil, NetdevViewNAPIs},
		// The device scope (no scope, or 0) needs the totals only; the queue scope the queues.
		{wire.NetdevCmdQStatsGet, nil, NetdevViewQStats | NetdevViewQStatsDevice},
		{wire.NetdevCmdQStatsGet, scope(0), NetdevViewQStats | NetdevViewQStatsDevice},
		{wire.NetdevCmdQStatsGet, scope(wire.NetdevQStatsScopeQueue), NetdevViewQStats},
		{wire.NetdevCmdPagePoolGet, nil, NetdevViewPools},
		{wire.NetdevCmdPagePoolStatsGet, nil, NetdevViewPools},
		{wire.NetdevCmdBindRX, nil, NetdevViewAll},
	} {
		vb := &viewsBackend{}
		r := &request{ctx: context.Background(), c: &conn{}, cmd: tc.cmd, attrs: tc.attrs,
			s: &Server{cfg: ServerConfig{Backend: Backend{NetdevPort: vb.NetdevPort, NetdevViews: vb.NetdevViews}}}}
		if _, err := r.netdevViews(Device{}); err != nil || len(vb.asked) != 1 || vb.asked[0] != tc.want || vb.full != 0 {
			t.Errorf("cmd %d: asked %v (full %d, err %v), want %b", tc.cmd, vb.asked, vb.full, err, tc.want)
		}
		fb := &fullOnlyBackend{}
		r.s.cfg.Backend = Backend{NetdevPort: fb.NetdevPort}
		if _, err := r.netdevViews(Device{}); err != nil || fb.full != 1 {
			t.Errorf("cmd %d without NetdevViews: NetdevPort asked %d times, err %v", tc.cmd, fb.full, err)
		}
	}
}
