package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

func TestWriteNetdev(t *testing.T) {
	const noIf = 0x7ffffff0 // no such ifindex: printed as if<N>
	name := "if2147483632"
	bit := func(ts ...uint16) (m uint64) {
		for _, t := range ts {
			m |= 1 << t
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		write func(w *bytes.Buffer)
		want  string
	}{
		{"queues", func(w *bytes.Buffer) {
			writeQueues(w, "mana0", []wire.NetdevQueue{{ID: 0, Type: 0, NAPIID: 8193}, {ID: 0, Type: 1}})
		}, "Queues of mana0:\nTYPE  QUEUE  NAPI-ID\nrx    0      8193\ntx    0      -\n"},
		{"page pools", func(w *bytes.Buffer) {
			writePagePools(w, []wire.NetdevPagePool{
				{ID: 1, Ifindex: noIf, NAPIID: 8193, Inflight: 19, InflightMem: 19 * 16384},
				{ID: 2, Ifindex: noIf, Inflight: 1, InflightMem: 16384, DetachTime: 100},
			}, 130)
		}, "ID  DEV           NAPI-ID  INFLIGHT  MEMORY            DETACHED\n" +
			"1   " + name + "  8193     19        311296 (304 KiB)  -\n" +
			"2   " + name + "  -        1         16384 (16 KiB)    at 100s (30s ago)\n"},
		{"qstats", func(w *bytes.Buffer) {
			writeQStats(w, []wire.NetdevQStats{
				{Ifindex: noIf, RxPackets: 5, RxBytes: 300, TxPackets: 2, TxBytes: 100,
					Present: bit(wire.NetdevAQStatsRxPackets, wire.NetdevAQStatsRxBytes, wire.NetdevAQStatsTxPackets, wire.NetdevAQStatsTxBytes)},
				{Ifindex: noIf, Scoped: true, Type: 0, QueueID: 1, RxHwDrops: 7, Present: bit(wire.NetdevAQStatsRxHwDrops)},
			})
		}, name + ":\n     rx-packets: 5\n     rx-bytes: 300\n     tx-packets: 2\n     tx-bytes: 100\n" +
			name + " rx-1:\n     rx-hw-drops: 7\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tc.write(&b)
			assert.Empty(t, cmp.Diff(tc.want, b.String()), "(-want +got)")
		})
	}
	// JSON carries exactly the counters the message did.
	j, err := json.Marshal(qstatsToJSON(wire.NetdevQStats{Ifindex: noIf, Scoped: true, Type: 1, QueueID: 3, TxPackets: 0,
		Present: bit(wire.NetdevAQStatsTxPackets)}))
	require.NoError(t, err)
	assert.Equal(t, `{"dev":"`+name+`","ifindex":2147483632,"type":"tx","queue":3,"tx_packets":0}`, string(j), "JSON %s", j)
}

// TestNetdevKernelFallback: without manad the netdev commands ask the kernel's netdev family:
// lo's queues, and an unknown device is refused before anything is sent.
func TestNetdevKernelFallback(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "manad.sock")
	code, out, errs := runCLI(t, sock, "queues", "lo")
	assert.Equal(t, 0, code, "queues lo: exit status; stderr %q", errs)
	assert.True(t, strings.HasPrefix(out, "Queues of lo:\nTYPE  QUEUE  NAPI-ID\n"), "queues lo: stdout %q", out)
	assert.Equal(t, "", errs, "queues lo: stderr")
	code, out, errs = runCLI(t, sock, "--json", "page-pools", "lo")
	assert.Equal(t, 0, code, "page-pools lo: exit %d, stdout %q, stderr %q", code, out, errs)
	assert.Equal(t, "[]\n", out, "page-pools lo: exit %d, stdout %q, stderr %q", code, out, errs)
	assert.Equal(t, "", errs, "page-pools lo: exit %d, stdout %q, stderr %q", code, out, errs)
	code, out, errs = runCLI(t, sock, "qstats", "mctlnodev0")
	assert.Equal(t, 1, code, "qstats of no device: exit %d, stdout %q, stderr %q", code, out, errs)
	assert.Equal(t, "", out, "qstats of no device: exit %d, stdout %q, stderr %q", code, out, errs)
	assert.Equal(t, "no device \"mctlnodev0\" in this network namespace: no such device\n", errs, "qstats of no device: exit %d, stdout %q, stderr %q", code, out, errs)
}

// TestMonitorNetdevGolden pins how monitor --netdev prints the netdev family's notifications,
// as text and as JSON lines (an ifindex absent here prints as ifN, none as "-").
func TestMonitorNetdevGolden(t *testing.T) {
	ns := []client.Notification{
		{Kind: client.NetdevDevAdded, Interface: client.Interface{Index: 999999}, NetdevDev: &wire.NetdevDev{Ifindex: 999999, XDPFeatures: 1}},
		{Kind: client.PagePoolAdded, Interface: client.Interface{Index: 999999}, PagePool: &wire.NetdevPagePool{ID: 12, Ifindex: 999999}},
		{Kind: client.PagePoolChanged, Interface: client.Interface{Index: 999999},
			PagePool: &wire.NetdevPagePool{ID: 11, Ifindex: 999999, Inflight: 1, InflightMem: 16384, DetachTime: 4242}},
		{Kind: client.PagePoolRemoved, PagePool: &wire.NetdevPagePool{ID: 11, DetachTime: 4242}},
		{Kind: client.NetdevDevRemoved, Interface: client.Interface{Index: 999999}, NetdevDev: &wire.NetdevDev{Ifindex: 999999, XDPFeatures: 1 | 1<<9}},
	}
	for _, tc := range []struct {
		golden string
		json   bool
	}{{"manactl/monitor-netdev.txt", false}, {"json/monitor-netdev.jsonl", true}} {
		var b bytes.Buffer
		a := &app{stdout: &b, json: tc.json}
		for _, n := range ns {
			require.NoError(t, writeNotification(a, n))
		}
		checkGolden(t, tc.golden, b.Bytes())
	}
}
