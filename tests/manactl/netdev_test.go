package manactl

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/genetlink"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/tests/harness"
)

// jsonOf runs manactl with --json inside the port's namespace and decodes its output.
func (e *e2e) jsonOf(t *testing.T, v any, args ...string) {
	t.Helper()
	out := ok(t, args[0], e.mctl(t, append([]string{"--json"}, args...)...))
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
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
		if want := map[bool]string{true: "rx", false: "tx"}[rx]; q.Type != want || q.ID != uint32(i%int(e.queues)) || (q.NAPIID != 0) != rx {
			t.Errorf("queue %d: %+v", i, q)
		}
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
		if _, ok := qs[0][k]; !ok {
			t.Errorf("qstats has no %s: %v", k, qs[0])
		}
	}
	e.jsonOf(t, &qs, "qstats", e.port, "--queue")
	if len(qs) != int(e.queues)*2 {
		t.Errorf("qstats --queue: %d entries, want %d: %v", len(qs), e.queues*2, qs)
	}

	var before []pool
	e.jsonOf(t, &before, "page-pools", e.port)
	if len(before) != int(e.queues) {
		t.Fatalf("%d page pools, want %d: %+v", len(before), e.queues, before)
	}
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
	if err := harness.InNetNS(e.ns, func() (err error) {
		if conn, err = client.DialGenetlink(e.d.Socket); err != nil {
			return err
		}
		fam, err = conn.GetFamily(wire.NetdevFamilyName)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var mgmt uint32
	for _, g := range fam.Groups {
		if g.Name == wire.NetdevGroupMgmt {
			mgmt = g.ID
		}
	}
	if err := conn.JoinGroup(mgmt); err != nil {
		t.Fatal(err)
	}
	q := harness.Name("mcd", "0")
	ok(t, "port add", e.mctl(t, "port", "add", q, "--netns", e.ns))
	ifi, err := strconv.Atoi(strings.TrimSpace(harness.Run(t, e.ns, "cat", "/sys/class/net/"+q+"/ifindex")))
	if err != nil {
		t.Fatal(err)
	}
	ok(t, "port del", e.mctl(t, "port", "del", q))
	var got []string
	for len(got) < 2 {
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		msgs, _, err := conn.Receive()
		if err != nil {
			t.Fatalf("receive (after %v): %v", got, err)
		}
		for _, m := range msgs {
			var d wire.NetdevDev
			if err := wire.NetdevDevTable.Decode(m.Data, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprint(m.Header.Command, " ", d.Ifindex))
		}
	}
	want := []string{fmt.Sprint(wire.NetdevCmdDevAddNtf, " ", ifi), fmt.Sprint(wire.NetdevCmdDevDelNtf, " ", ifi)}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("notifications %v, want %v", got, want)
	}
}
