package manactl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

// jsonOf runs manactl with --json inside the port's namespace and decodes its output.
func (e *e2e) jsonOf(t *testing.T, v any, args ...string) {
	t.Helper()
	out := ok(t, args[0], e.mctl(t, append([]string{"--json"}, args...)...))
	err := json.Unmarshal([]byte(out), v)
	require.NoError(t, err, "%v: %v\n%s", args, err, out)
}

type pool struct {
	ID         uint64 `json:"id"`
	Dev        string `json:"dev"`
	NAPIID     uint64 `json:"napi_id"`
	Inflight   uint64 `json:"inflight"`
	DetachTime uint64 `json:"detach_time"`
}

// TestNetdevCommands: against the real daemon, queues, qstats and page-pools show the running
// port's queues with their NAPI ids, its counters, and its page pools; after set-channels the
// pools are the new queues' (new ids), and an old pool is listed only detached (detach-time, no
// NAPI) until it drains.
func TestNetdevCommands(t *testing.T) {
	e := startE2E(t)
	harness.Run(t, e.ns, "ip", "link", "set", e.port, "up")
	var queues []struct {
		Type   string `json:"type"`
		ID     uint32 `json:"id"`
		NAPIID uint64 `json:"napi_id"`
	}
	harness.Eventually(t, "the port's queues", func() bool {
		e.jsonOf(t, &queues, "queues", e.port)
		return len(queues) == int(e.queues)*2
	})
	napis := map[uint64]bool{}
	for i, q := range queues {
		rx := i < int(e.queues)
		want := map[bool]string{true: "rx", false: "tx"}[rx]
		assert.Equal(t, want, q.Type, "queue %d: %+v", i, q)
		assert.Equal(t, uint32(i%int(e.queues)), q.ID, "queue %d: %+v", i, q)
		assert.Equal(t, rx, q.NAPIID != 0, "queue %d: %+v", i, q)
		if rx {
			napis[q.NAPIID] = true
		}
	}

	var qs []map[string]any
	e.jsonOf(t, &qs, "qstats", e.port)
	if len(qs) != 1 || qs[0]["dev"] != e.port {
		t.Fatalf("qstats: %v", qs)
	}
	for _, k := range []string{"rx_packets", "rx_bytes", "rx_alloc_fail", "rx_hw_drops", "rx_hw_drop_overruns", "tx_packets", "tx_bytes"} {
		_, ok := qs[0][k]
		assert.True(t, ok, "qstats has no %s: %v", k, qs[0])
	}
	e.jsonOf(t, &qs, "qstats", e.port, "--queue")
	assert.Len(t, qs, int(e.queues)*2, "qstats --queue: %d entries, want %d", len(qs), e.queues*2)

	var before []pool
	e.jsonOf(t, &before, "page-pools", e.port)
	require.Len(t, before, int(e.queues), "%d page pools, want %d", len(before), e.queues)
	old := map[uint64]bool{}
	for _, p := range before {
		if p.Dev != e.port || !napis[p.NAPIID] || p.DetachTime != 0 || p.Inflight == 0 {
			t.Errorf("running pool %+v (NAPIs %v)", p, napis)
		}
		old[p.ID] = true
	}

	ok(t, "-L", e.mctl(t, "-L", e.port, "combined", "2"))
	harness.Eventually(t, "the new queues' pools alone", func() bool {
		var after []pool
		e.jsonOf(t, &after, "page-pools", e.port)
		running := 0
		for _, p := range after {
			switch {
			case old[p.ID] && p.DetachTime != 0 && p.NAPIID == 0: // draining
			case !old[p.ID] && p.DetachTime == 0 && p.NAPIID != 0:
				running++
			default:
				t.Fatalf("pool after set-channels %+v (old ids %v)", p, old)
			}
		}
		return running == 2 && len(after) == 2
	})
}

// TestNetdevDevNotifications: a netdev "mgmt" subscriber in the port's namespace is told of a
// port added and deleted there, with its ifindex.
func TestNetdevDevNotifications(t *testing.T) {
	e := startE2E(t)
	var conn *genetlink.Conn
	var fam genetlink.Family
	require.NoError(t, harness.InNetNS(e.ns, func() (err error) {
		if conn, err = client.DialGenetlink(e.d.Socket); err != nil {
			return err
		}
		fam, err = conn.GetFamily(wire.NetdevFamilyName)
		return err
	}))
	t.Cleanup(func() { conn.Close() })
	var mgmt uint32
	for _, g := range fam.Groups {
		if g.Name == wire.NetdevGroupMgmt {
			mgmt = g.ID
		}
	}
	require.NoError(t, conn.JoinGroup(mgmt))
	q := harness.Name("mcd", "0")
	ok(t, "port add", e.mctl(t, "port", "add", q, "--netns", e.ns))
	ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, e.ns, "cat", "/sys/class/net/"+q+"/ifindex")))
	require.NoError(t, err)
	ok(t, "port del", e.mctl(t, "port", "del", q))
	var got []string
	for len(got) < 2 {
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		msgs, _, err := conn.Receive()
		require.NoError(t, err, "receive (after %v)", got)
		for _, m := range msgs {
			var d wire.NetdevDev
			require.NoError(t, wire.NetdevDevTable.Decode(m.Data, &d))
			got = append(got, fmt.Sprint(m.Header.Command, " ", d.Ifindex))
		}
	}
	want := []string{fmt.Sprint(wire.NetdevCmdDevAddNtf, " ", ifi), fmt.Sprint(wire.NetdevCmdDevDelNtf, " ", ifi)}
	assert.Equal(t, strings.Join(want, ","), strings.Join(got, ","), "notifications %v, want %v", got, want)
}
