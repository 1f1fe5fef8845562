package layout

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/vnic/rxbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name  string
		req   genl.LayoutRequest
		rules []string
		errno unix.Errno
	}{
		{"all rules, newest first", genl.LayoutRequest{PageSize: 4096, MTU: 1500}, []string{"upstream", "pre-headroom", "pre-frag"}, 0},
		{"named rules in order", genl.LayoutRequest{PageSize: 65536, MTU: 9000, Rules: []string{"pre-frag", "upstream"}}, []string{"pre-frag", "upstream"}, 0},
		{"unknown rule", genl.LayoutRequest{PageSize: 4096, MTU: 1500, Rules: []string{"bogus"}}, nil, unix.EINVAL},
		{"bad page size", genl.LayoutRequest{PageSize: 8192, MTU: 1500}, nil, unix.EINVAL},
		{"XDP MTU", genl.LayoutRequest{PageSize: 4096, MTU: 9000, XDP: true}, nil, unix.EOPNOTSUPP},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := Plan(tc.req)
			if tc.errno != 0 {
				require.ErrorIs(t, err, tc.errno, "Plan: %v, %v; want %v", ls, err, tc.errno)
				require.Nil(t, ls, "Plan: %v, %v; want %v", ls, err, tc.errno)
				return
			}
			require.NoError(t, err, "Plan: %v, %v", ls, err)
			require.Len(t, ls, len(tc.rules), "Plan: %v, %v", ls, err)
			for i, l := range ls {
				rule, _ := rxbuf.ParseRule(tc.rules[i])
				want, err := rxbuf.Compute(rxbuf.Params{Rule: rule, PageSize: int(tc.req.PageSize), MTU: int(tc.req.MTU)})
				if err != nil || l != Wire(want) {
					t.Errorf("layout %d: %+v, want %+v (%v)", i, l, Wire(want), err)
				}
			}
		})
	}
}

// TestWire: every field of the model's layout reaches the wire form.
func TestWire(t *testing.T) {
	l, err := rxbuf.Compute(rxbuf.Params{Rule: rxbuf.RulePreHeadroom, PageSize: 16384, MTU: 1500, FullPageRx: true, RingSize: 512, Queues: 3})
	require.NoError(t, err)
	w := Wire(l)
	want := genl.RxBufLayout{
		Rule: "pre-headroom", PageSize: 16384, MTU: 1500, FullPageRx: true, DataSize: uint32(l.DataSize),
		AllocSize: uint32(l.AllocSize), Headroom: uint32(l.Headroom), BufSize: uint32(l.BufSize),
		FragCount: uint32(l.FragCount), Order: uint32(l.Order), PoolSize: uint32(l.PoolSize), Single: l.Single,
		Reason: l.Reason, RingSize: 512, Queues: 3, PagesPerQueue: uint32(l.PagesPerQueue),
		BytesPerQueue: uint64(l.BytesPerQueue), BytesTotal: uint64(l.BytesTotal),
	}
	assert.Equal(t, want, w, "Wire:\n%+v\nwant\n%+v", w, want)
	assert.NotEqual(t, uint32(0), w.DataSize, "Wire:\n%+v\nwant\n%+v", w, want)
	assert.NotEqual(t, "", w.Reason, "Wire:\n%+v\nwant\n%+v", w, want)
	assert.NotEqual(t, uint64(0), w.BytesTotal, "Wire:\n%+v\nwant\n%+v", w, want)
}

// TestPlanAlloc: the allocation mode reaches every rule's layout.
func TestPlanAlloc(t *testing.T) {
	req := genl.LayoutRequest{PageSize: 16384, MTU: 1500}
	for _, a := range rxbuf.Allocs {
		ls, err := PlanAlloc(req, a)
		require.NoError(t, err, "%v: %v, %v", a, ls, err)
		require.Len(t, ls, len(rxbuf.Rules), "%v: %v, %v", a, ls, err)
		for i, l := range ls {
			want := rxbuf.MustCompute(rxbuf.Params{Rule: rxbuf.Rules[i], PageSize: 16384, MTU: 1500, Alloc: a})
			assert.Equal(t, Wire(want), l, "%v %v", a, rxbuf.Rules[i])
		}
	}
	if ls, _ := PlanAlloc(req, rxbuf.AllocNoPool); ls[0].FragCount != 1 || ls[0].PoolSize != 0 {
		t.Errorf("no-pool upstream layout %+v", ls[0])
	}
}
