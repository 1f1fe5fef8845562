package main

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/manad/manad/bench/internal/benchrow"
)

// The UDP figures of issue 14 where receive coalescing of UDP is legitimate at the destination:
// its device has rx-udp-gro-forwarding on (and rx-gro, a TAP's default), so the kernel's GRO
// merges a flow's datagrams there whatever becomes of them, and manad's port, playing the TAP's
// NIC, writes them as USO superframes (datapath.Endpoint.SetUDPGRO). The peer is veth with the
// same features on its receiving end (there they also give the veth its NAPI, and GRO), measured
// in the same rounds as every other path.

// The paths' names.
const (
	groVeth     = "veth, rx-udp-gro-forwarding"
	groFragment = "manad fragment, rx-udp-gro-forwarding"
	groFullPage = "manad full-page, rx-udp-gro-forwarding"
)

// groPath reports whether name is one of the paths of setupGRO, which measure UDP only (the
// features change nothing for TCP).
func groPath(name string) bool { return name == groVeth || name == groFragment || name == groFullPage }

// groFeatures are what the destination devices of the paths get (ethtool -K).
var groFeatures = []string{"gro", "on", "rx-udp-gro-forwarding", "on"}

// setupGRO adds the veth pair of the figures, turns the features on at the destination of it and
// of manad's paths, and returns the paths, veth's first.
func (b *bench) setupGRO(manad ...path) ([]path, error) {
	va, err := b.ns("ga")
	if err != nil {
		return nil, err
	}
	vb, err := b.ns("gb")
	if err != nil {
		return nil, err
	}
	if err := run("ip", "link", "add", "vga", "netns", va, "type", "veth", "peer", "name", "vgb", "netns", vb); err != nil {
		return nil, err
	}
	if err := errors.Join(addr(va, "vga", "10.247.0.1"), addr(vb, "vgb", "10.247.0.2")); err != nil {
		return nil, err
	}
	paths := append([]path{{groVeth, va, vb, "10.247.0.2", "vgb"}}, manad...)
	for _, p := range paths {
		if err := run(append([]string{"ip", "netns", "exec", p.dst, "ethtool", "-K", p.dstDev}, groFeatures...)...); err != nil {
			return nil, err
		}
		out, err := exec.Command("ip", "netns", "exec", p.dst, "ethtool", "-k", p.dstDev).Output()
		if err != nil {
			return nil, fmt.Errorf("ethtool -k %s: %w", p.dstDev, err)
		}
		for _, f := range []string{"generic-receive-offload: on", "rx-udp-gro-forwarding: on"} {
			if !strings.Contains(string(out), f) {
				return nil, fmt.Errorf("%s: %s has no %q after ethtool -K", p.name, p.dstDev, f)
			}
		}
	}
	return paths, nil
}

// groRows are manad's delivered datagrams on the paths of setupGRO against veth's with the same
// features, in the same rounds (issue 14's target), and against plain veth's, whose receiving end
// has no GRO at all.
func groRows(udp map[string]map[int][]sample) []benchrow.Row {
	var out []benchrow.Row
	row := func(name, peer, figure string, sz int) benchrow.Row {
		var del, veth, ratios []float64
		for i, s := range udp[name][sz] {
			v := udp[peer][sz][i].delivered
			del, veth = append(del, s.delivered), append(veth, v)
			if v > 0 {
				ratios = append(ratios, s.delivered/v)
			}
		}
		v, r := benchrow.StatOf(del), benchrow.StatOf(ratios)
		return benchrow.Row{Issue: 14, Figure: figure, Value: v.Median, Min: v.Min, Max: v.Max, Rounds: len(del), Unit: "pps",
			Baseline: benchrow.StatOf(veth).Median, BaselineName: peer, Ratio: r.Median, RatioMin: r.Min, RatioMax: r.Max}
	}
	for _, name := range []string{groFragment, groFullPage} {
		for _, sz := range sizes {
			if len(udp[name][sz]) == 0 {
				continue // --iperf
			}
			x := row(name, groVeth, fmt.Sprintf("UDP %d B delivered, %s on both, vs veth", sz, name), sz)
			if sz == 64 {
				x.Target = "ratio ≥ 0.8"
			}
			out = append(out, x, row(name, "veth", fmt.Sprintf("UDP %d B delivered, %s vs plain veth", sz, name), sz))
		}
	}
	return out
}
