package daemon

import (
	"slices"
	"sync"
	"testing"

	"github.com/manad/manad/daemon/metrics"
	"github.com/manad/manad/vnic"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatNamesFollowQueues: the cached ETH_SS_STATS names are rebuilt when the queue count
// changes, and are always what the port's counters are named for its current count.
func TestStatNamesFollowQueues(t *testing.T) {
	var mu sync.Mutex
	vp, _ := newModelPort(t, &mu, vnic.Config{Name: "sn0", PageSize: 4096}, vnic.Settings{MTU: 1500, Queues: 4, RxRing: 128, TxRing: 128})
	p := &port{vp: vp}
	want := func(q int) []string {
		return slices.Concat(vnic.StatNames(q), vnic.ExtraStatNames(), vnic.CounterNames(metrics.DatapathCounters, q))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range []int{4, 4, 2, 3, 3} {
		require.NoError(t, vp.SetChannels(q))
		got := p.statNames()
		assert.True(t, slices.Equal(got, want(q)), "%d queues: %d names, want %d", q, len(got), len(want(q)))
	}
}
