package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// coalesceField is one line of ethtool -c: its JSON key, its text label and its attribute.
type coalesceField struct {
	key, label string
	attr       uint16
	bool       bool
}

// coalesceLayout is ethtool 6.1's coalesce_reply_cb, line by line; a nil-attribute entry is an
// empty line. Two booleans share a line (label of the first ends with two spaces, no newline).
var coalesceLayout = []coalesceField{
	{"adaptive-rx", "Adaptive RX: ", unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX, true},
	{"adaptive-tx", "TX: ", unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX, true},
	{"stats-block-usecs", "stats-block-usecs: ", unix.ETHTOOL_A_COALESCE_STATS_BLOCK_USECS, false},
	{"sample-interval", "sample-interval: ", unix.ETHTOOL_A_COALESCE_RATE_SAMPLE_INTERVAL, false},
	{"pkt-rate-low", "pkt-rate-low: ", unix.ETHTOOL_A_COALESCE_PKT_RATE_LOW, false},
	{"pkt-rate-high", "pkt-rate-high: ", unix.ETHTOOL_A_COALESCE_PKT_RATE_HIGH, false},
	{},
	{"rx-usecs", "rx-usecs: ", unix.ETHTOOL_A_COALESCE_RX_USECS, false},
	{"rx-frames", "rx-frames: ", unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES, false},
	{"rx-usecs-irq", "rx-usecs-irq: ", unix.ETHTOOL_A_COALESCE_RX_USECS_IRQ, false},
	{"rx-frames-irq", "rx-frames-irq: ", unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_IRQ, false},
	{},
	{"tx-usecs", "tx-usecs: ", unix.ETHTOOL_A_COALESCE_TX_USECS, false},
	{"tx-frames", "tx-frames: ", unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES, false},
	{"tx-usecs-irq", "tx-usecs-irq: ", unix.ETHTOOL_A_COALESCE_TX_USECS_IRQ, false},
	{"tx-frames-irq", "tx-frames-irq: ", unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_IRQ, false},
	{},
	{"rx-usecs-low", "rx-usecs-low: ", unix.ETHTOOL_A_COALESCE_RX_USECS_LOW, false},
	{"rx-frame-low", "rx-frame-low: ", unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_LOW, false},
	{"tx-usecs-low", "tx-usecs-low: ", unix.ETHTOOL_A_COALESCE_TX_USECS_LOW, false},
	{"tx-frame-low", "tx-frame-low: ", unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_LOW, false},
	{},
	{"rx-usecs-high", "rx-usecs-high: ", unix.ETHTOOL_A_COALESCE_RX_USECS_HIGH, false},
	{"rx-frame-high", "rx-frame-high: ", unix.ETHTOOL_A_COALESCE_RX_MAX_FRAMES_HIGH, false},
	{"tx-usecs-high", "tx-usecs-high: ", unix.ETHTOOL_A_COALESCE_TX_USECS_HIGH, false},
	{"tx-frame-high", "tx-frame-high: ", unix.ETHTOOL_A_COALESCE_TX_MAX_FRAMES_HIGH, false},
	{},
	{"cqe-mode-rx", "CQE mode RX: ", unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_RX, true},
	{"cqe-mode-tx", "TX: ", unix.ETHTOOL_A_COALESCE_USE_CQE_MODE_TX, true},
	{},
}

// coalesceJSONOnly are parameters ethtool 6.1 does not print but --json reports when present.
var coalesceJSONOnly = []coalesceField{
	{"tx-aggr-max-bytes", "", wire.CoalesceTxAggrMaxBytes, false},
	{"tx-aggr-max-frames", "", wire.CoalesceTxAggrMaxFrames, false},
	{"tx-aggr-time-usecs", "", wire.CoalesceTxAggrTimeUsecs, false},
	{"rx-cqe-frames", "", wire.CoalesceRxCQEFrames, false},
	{"rx-cqe-nsecs", "", wire.CoalesceRxCQENsecs, false},
}

// writeCoalesce prints co as ethtool 6.1's -c: an absent parameter is "n/a".
func writeCoalesce(w io.Writer, dev string, co *client.Coalesce) {
	fmt.Fprintf(w, "Coalesce parameters for %s:\n", dev)
	pairFirst := true
	for _, f := range coalesceLayout {
		if f.key == "" {
			fmt.Fprintln(w)
			continue
		}
		v, ok := co.Attrs[f.attr]
		val := "n/a"
		switch {
		case ok && f.bool:
			val = onOff(v != 0)
		case ok:
			val = fmt.Sprint(v)
		}
		end := "\n"
		if f.bool && pairFirst {
			end = "  "
		}
		if f.bool {
			pairFirst = !pairFirst
		}
		fmt.Fprintf(w, "%s%s%s", f.label, val, end)
	}
}

// coalesceJSON is one device's --json object: ifname, then the parameters the device reported,
// in ethtool's order, booleans as true/false.
type coalesceJSON struct {
	dev string
	co  *client.Coalesce
}

func (c coalesceJSON) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	name, _ := json.Marshal(c.dev)
	fmt.Fprintf(&b, `{"ifname":%s`, name)
	for _, f := range append(append([]coalesceField(nil), coalesceLayout...), coalesceJSONOnly...) {
		v, ok := c.co.Attrs[f.attr]
		if f.key == "" || !ok {
			continue
		}
		if f.bool {
			fmt.Fprintf(&b, `,%q:%t`, f.key, v != 0)
		} else {
			fmt.Fprintf(&b, `,%q:%d`, f.key, v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// coalesceParams are set-coalesce's parameters, ethtool -C's names (plus the newest ethtool's
// rx-cqe-frames and rx-cqe-nsecs), with their attributes.
var coalesceParams = func() map[string]coalesceField {
	m := map[string]coalesceField{}
	for _, f := range append(append([]coalesceField(nil), coalesceLayout...), coalesceJSONOnly...) {
		if f.key != "" {
			m[f.key] = f
		}
	}
	// ethtool -C spells the -low/-high frame counts "frames", where -c prints "frame".
	for _, k := range []string{"rx-frame-low", "tx-frame-low", "rx-frame-high", "tx-frame-high"} {
		f := m[k]
		delete(m, k)
		m[k[:8]+"s"+k[8:]] = f
	}
	return m
}()

func coalesceParamNames() []string {
	var names []string
	for _, f := range append(append([]coalesceField(nil), coalesceLayout...), coalesceJSONOnly...) {
		for k, g := range coalesceParams {
			if f.key != "" && g.attr == f.attr {
				names = append(names, k)
			}
		}
	}
	return names
}

// parseCoalesceUpdate turns set-coalesce's "NAME VALUE …" into a client.CoalesceUpdate.
func parseCoalesceUpdate(args []string) (client.CoalesceUpdate, error) {
	u := client.CoalesceUpdate{U32: map[uint16]uint32{}, Bool: map[uint16]bool{}}
	pairs, err := parseParams("coalesce", args, coalesceParamNames())
	if err != nil {
		return u, err
	}
	for _, p := range pairs {
		f := coalesceParams[p[0]]
		if f.bool {
			b, err := parseOnOff(p[0], p[1])
			if err != nil {
				return u, err
			}
			u.Bool[f.attr] = b
			continue
		}
		n, err := parseU32(p[0], p[1])
		if err != nil {
			return u, err
		}
		u.U32[f.attr] = n
	}
	return u, nil
}

// ShowCoalesce is a top-level command (see topLevel).
func (t topLevel) ShowCoalesce() *cobra.Command { return showCoalesceCmd(t.app) }

func showCoalesceCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-coalesce DEV",
		Short: "Show interrupt and CQE coalescing (ethtool -c)",
		Long: `Show the coalescing parameters, as ethtool -c (6.1) prints them; a parameter the
device does not support is n/a. --json also reports rx-cqe-frames and rx-cqe-nsecs.`,
		Example: `  manactl -c mana0
  manactl --json show-coalesce mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-c", "--show-coalesce"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var co *client.Coalesce
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				co, err = c.Coalesce(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(co.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []coalesceJSON{{dev, co}}))
			}
			writeCoalesce(a.stdout, dev, co)
			return nil
		},
	}
}

// SetCoalesce is a top-level command (see topLevel).
func (t topLevel) SetCoalesce() *cobra.Command { return setCoalesceCmd(t.app) }

func setCoalesceCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-coalesce DEV PARAM VALUE [PARAM VALUE ...]",
		Short: "Change interrupt and CQE coalescing (ethtool -C)",
		Long: `Change coalescing parameters, with ethtool -C's names (rx-usecs N, rx-frames N,
tx-usecs N, tx-frames N, adaptive-rx on|off, adaptive-tx on|off, ...) and the newest
ethtool's rx-cqe-frames N. A manad port takes rx-usecs and tx-usecs up to 1023,
rx-frames and tx-frames up to 255, adaptive-rx/-tx, and rx-cqe-frames 1 or 4 (8
where the port has the capability); any other parameter is refused as the kernel
refuses one the driver does not support. A port that is down applies the change
when it next comes up.`,
		Example: `  manactl -C mana0 rx-cqe-frames 4
  manactl set-coalesce mana0 rx-usecs 50 tx-usecs 50`,
		Args:              devArgs(2, -1),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-C", "--coalesce"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseCoalesceUpdate(args[1:])
			if err != nil {
				return err
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				return c.SetCoalesce(cmd.Context(), client.Interface{Name: args[0]}, u)
			})
		},
	}
}
