package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/bench/internal/benchrow"
	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/manad/manad/vnic/rxbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup() // the binaries PlainBinaries built
	os.Exit(code)
}

// TestModelDirections checks, without root, that each table's modelled figures go the way its
// thread says, straight from the variants the tables configure their ports with.
func TestModelDirections(t *testing.T) {
	tests := []struct {
		name string
		v    variant
		col  string
		want float64
	}{
		// 001: "35 rx buffers in a single 64kb page for MTU 1500, instead of 1".
		{"001 pre-frag 1500", variants001[0], colPerPage, 1},
		{"001 frag 1500", variants001[1], colPerPage, 35},
		{"001 pre-frag 9000", variants001[2], colPerPage, 1},
		{"001 frag 9000", variants001[3], colPerPage, 7},
		{"001 pre-frag 1500 memory", variants001[0], colMemQueue, 64},
		{"001 frag 1500 pages", variants001[1], colPagesQueue, 30}, // ⌈1024/35⌉
		// 000: two 1856-byte fragments per 4K page, one with the flag.
		{"000 fragment", variants000[0], colPerPage, 2},
		{"000 full-page", variants000[1], colPerPage, 1},
		{"000 fragment memory", variants000[0], colMemQueue, 2},
		{"000 full-page memory", variants000[1], colMemQueue, 4},
		// 002: no headroom before the rule, LL_RESERVED_SPACE after; 2112 bytes no longer fit twice.
		{"002 before headroom", variants002[0], colHeadroom, 0},
		{"002 after headroom", variants002[1], colHeadroom, rxbuf.LLReservedSpace},
		{"002 before per page", variants002[0], colPerPage, 2},
		{"002 after per page", variants002[1], colPerPage, 1},
		// 003: no pool and a pool page hold one buffer per page, the fragment path two.
		{"003 no pool", variants003[0], colPerPage, 1},
		{"003 pp page", variants003[1], colPerPage, 1},
		{"003 pp 2 frags", variants003[2], colPerPage, 2},
		// 004: without recycling every frame costs a page (one buffer per page), with it none.
		{"004 off", variants004[0], colPagesPer1k, 1000},
		{"004 on", variants004[1], colPagesPer1k, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := modelCells(tt.v)[tt.col]
			if !c.ok || c.text != "" || c.stat.Median != tt.want {
				t.Errorf("%s = %+v, want %v", tt.col, c, tt.want)
			}
		})
	}
	if got := modelCells(variants002[0])[colExpandModel].text; got != "yes" {
		t.Errorf("002 before: would pskb_expand_head %q, want yes", got)
	}
	got := modelCells(variants002[1])[colExpandModel].text
	assert.Equal(t, "no", got, "002 after: would pskb_expand_head %q, want no", got)
}

// TestVariantsAreValidPorts parses every variant's [[port]] table with the daemon's own parser:
// the port a table measures is the port its model columns describe.
func TestVariantsAreValidPorts(t *testing.T) {
	var all []variant
	for _, vs := range [][]variant{variants000, variants001, variants002, variants003, variants004} {
		all = append(all, vs...)
	}
	for _, v := range all {
		for _, x := range []variant{v, plain(v)} {
			t.Run(x.label, func(t *testing.T) {
				cfg, err := config.Parse("seeds.toml", []byte(x.portTOML("eth0", "ns0", "seg0")))
				require.NoError(t, err)
				p := cfg.Ports[0]
				assert.Equal(t, x.pageSize, p.PageSize, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.rule, p.Rule, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.mtu, p.MTU, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.queues, p.Queues, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.ring, p.RxRing, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.alloc, p.RxAlloc, "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, !x.noRecycle, p.RxRecycle.On(), "parsed %+v, want the variant %+v", p, x)
				assert.Equal(t, x.fullPage, p.PrivFlags != 0, "parsed %+v, want the variant %+v", p, x)
				if _, err := rxbuf.Compute(x.params()); err != nil {
					t.Errorf("model refuses the variant: %v", err)
				}
			})
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		o    opts
		euid int
		want string
	}{
		{opts{rounds: 1, window: time.Second}, 0, ""},
		{opts{rounds: 0, window: time.Second}, 0, "-rounds"},
		{opts{rounds: 1, window: time.Millisecond}, 0, "-seconds"},
		{opts{rounds: 1, window: time.Hour}, 0, "-seconds"},
		{opts{rounds: 1, window: time.Second}, 1000, "needs root"},
	}
	for _, tt := range tests {
		err := validate(tt.o, tt.euid)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v, %d) = %v, want %q", tt.o, tt.euid, err, tt.want)
		}
	}
}

// TestTableShape renders a table and its JSON rows: every row says what in it is modelled and
// what measured, the thread's figures are labelled as theirs, and only measured cells become
// report rows, each against the table's first row.
func TestTableShape(t *testing.T) {
	tb := table{seed: "004", title: "x",
		columns: []column{{name: colPagesPer1k, kind: modelled}, {name: colDrop, kind: measured, unit: "pps", offered: colOffered},
			{name: colOffered, kind: measured, unit: "pps", offer: true}, {name: colThread, kind: thread}},
		rows: []row{
			{label: "off", cells: map[string]cell{colPagesPer1k: num(1000), colDrop: over([]float64{90, 100, 110}), colOffered: over([]float64{400}), colThread: text("269 kpps")}},
			{label: "on", cells: map[string]cell{colPagesPer1k: num(0), colDrop: over([]float64{200, 210, 190}), colOffered: over([]float64{205}), colThread: text("296 kpps")}},
		}}
	var b bytes.Buffer
	tb.write(&b)
	out := b.String()
	for _, want := range []string{"Seed 004: x", "[model]", "[measured]", "thread (their hardware)", "100 [90–110]",
		"model: " + colPagesPer1k + "; measured: " + colDrop + ", " + colOffered + "; thread's own: " + colThread} {
		assert.Contains(t, out, want, "table lacks")
	}
	rows := tb.benchRows()
	require.Len(t, rows, 2, "%d JSON rows, want 2 (one per row of the one measured, non-offer column): %+v", len(rows), rows)
	if rows[0].Baseline != 0 || rows[1].Baseline != 100 || rows[1].Ratio != 2 || rows[1].Rounds != 3 {
		t.Errorf("rows %+v: want the second against the first (100 → 200, 3 rounds)", rows)
	}
	if rows[0].SenderBound || !rows[1].SenderBound || rows[1].Offered != 205 {
		t.Errorf("rows %+v: want only the second sender-bound (200 of 205 offered)", rows)
	}
	var jb bytes.Buffer
	require.NoError(t, output(&jb, []table{tb}, true))
	for _, l := range strings.Split(strings.TrimSpace(jb.String()), "\n") {
		var r benchrow.Row
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Issue != 11 || r.Figure == "" {
			t.Errorf("JSON row %q: %v", l, err)
		}
	}
}

// TestSeedsShort runs the program's short mode against the real manad binary in network
// namespaces and checks that every table has its rows and figures, and that each effect the
// model predicts shows the thread's direction in the measured columns too.
func TestSeedsShort(t *testing.T) {
	testenv.RequireRoot(t)
	bin, _ := harness.PlainBinaries(t)
	o := opts{rounds: 1, window: 200 * time.Millisecond}
	tables, err := measure(context.Background(), bin, o, true)
	require.NoError(t, err)
	want := map[string]int{"000": 2, "001": 4, "002": 2, "003": 3, "004": 2}
	require.Len(t, tables, len(want), "%d tables, want %d", len(tables), len(want))
	byseed := map[string]table{}
	for _, tb := range tables {
		byseed[tb.seed] = tb
		assert.Len(t, tb.rows, want[tb.seed], "seed %s: %d rows, want %d", tb.seed, len(tb.rows), want[tb.seed])
		for _, r := range tb.rows {
			for _, c := range tb.columns {
				x, ok := r.cells[c.name]
				if !ok || !x.ok {
					t.Errorf("seed %s, %s: no %s", tb.seed, r.label, c.name)
					continue
				}
				if c.kind == measured && x.text == "" {
					assert.Equal(t, o.rounds, x.n, "seed %s, %s, %s: %d rounds, want %d", tb.seed, r.label, c.name, x.n, o.rounds)
				}
			}
		}
	}
	v := func(seed string, row int, col string) float64 {
		t.Helper()
		tb := byseed[seed]
		require.Less(t, row, len(tb.rows), "seed %s has no row", seed)
		x, ok := tb.value(tb.rows[row].label, col)
		require.True(t, ok, "seed %s, %s: %s is not a figure", seed, tb.rows[row].label, col)
		return x
	}
	// 001: 35 vs 1 per page, and the live pools pin accordingly fewer pages.
	assert.Equal(t, float64(1), v("001", 0, colPerPage), "001: %v vs %v buffers per page, want 1 vs 35", v("001", 0, colPerPage), v("001", 1, colPerPage))
	assert.Equal(t, float64(35), v("001", 1, colPerPage), "001: %v vs %v buffers per page, want 1 vs 35", v("001", 0, colPerPage), v("001", 1, colPerPage))
	for _, pre := range []int{0, 2} {
		a, b := v("001", pre, colPagesNow), v("001", pre+1, colPagesNow)
		assert.LessOrEqual(t, b*2, a, "001 %s: fragments pin %v pages per queue, one page per buffer %v; want far fewer", byseed["001"].rows[pre+1].label, b, a)
	}
	// 000: the flag halves the buffers per page; both modes carry the streams; flips are timed.
	assert.Equal(t, float64(2), v("000", 0, colPerPage), "000: buffers per page %v / %v, want 2 / 1", v("000", 0, colPerPage), v("000", 1, colPerPage))
	assert.Equal(t, float64(1), v("000", 1, colPerPage), "000: buffers per page %v / %v, want 2 / 1", v("000", 0, colPerPage), v("000", 1, colPerPage))
	for row := range 2 {
		assert.Greater(t, v("000", row, colTCP), float64(0), "000 row %d: TCP %v Mbit/s, blackout %v ms, flip %v ms; want all > 0", row, v("000", row, colTCP), v("000", row, colBlackout), v("000", row, colFlip))
		assert.Greater(t, v("000", row, colBlackout), float64(0), "000 row %d: TCP %v Mbit/s, blackout %v ms, flip %v ms; want all > 0", row, v("000", row, colTCP), v("000", row, colBlackout), v("000", row, colFlip))
		assert.Greater(t, v("000", row, colFlip), float64(0), "000 row %d: TCP %v Mbit/s, blackout %v ms, flip %v ms; want all > 0", row, v("000", row, colTCP), v("000", row, colBlackout), v("000", row, colFlip))
	}
	// 002: the would-expand-head counter is non-zero before the headroom rule and zero after.
	assert.NotEqual(t, float64(0), v("002", 0, colShortHR), "002 before: short-headroom frames 0, want every forwarded frame")
	n := v("002", 1, colShortHR)
	assert.Equal(t, float64(0), n, "002 after: short-headroom frames %v, want 0", n)
	p := v("002", 0, colFwdPPS)
	assert.Greater(t, p, float64(0), "002 before: forwarded %v pps", p)
	// 003: every allocation mode drops at both sizes.
	for row := range 3 {
		assert.Greater(t, v("003", row, colDrop64), float64(0), "003 row %d: drop rates %v / %v pps", row, v("003", row, colDrop64), v("003", row, colDrop128))
		assert.Greater(t, v("003", row, colDrop128), float64(0), "003 row %d: drop rates %v / %v pps", row, v("003", row, colDrop64), v("003", row, colDrop128))
	}
	// 004: without recycling the pools allocate about a page per frame, with it (almost) none.
	off, on := v("004", 0, colAllocSlow), v("004", 1, colAllocSlow)
	assert.GreaterOrEqual(t, off, float64(500), "004: %v pages per 1000 frames without recycling, %v with; want ~1000 and ~0", off, on)
	assert.LessOrEqual(t, on*10, off, "004: %v pages per 1000 frames without recycling, %v with; want ~1000 and ~0", off, on)
	var b bytes.Buffer
	if err := output(&b, tables, false); err != nil || strings.Count(b.String(), "Seed ") != 5 {
		t.Errorf("output: %v, %d tables printed", err, strings.Count(b.String(), "Seed "))
	}
}
