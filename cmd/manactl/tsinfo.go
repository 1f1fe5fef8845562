package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/client"
)

// ShowTimeStamping is a top-level command (see topLevel).
func (t topLevel) ShowTimeStamping() *cobra.Command { return showTimeStampingCmd(t.app) }

// showTimeStampingCmd is ethtool -T.
func showTimeStampingCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-time-stamping DEV",
		Short: "Show time stamping capabilities (ethtool -T)",
		Long: `Show the time stamping capabilities, as ethtool -T (6.1) prints them. A manad
port, like the mana driver, has software receive time stamps only and no PTP
hardware clock.`,
		Example: `  manactl -T mana0
  manactl --json show-time-stamping mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-T", "--show-time-stamping"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ts *client.TSInfo
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ts, err = c.TSInfo(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(ts.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []tsInfoJSON{tsInfoToJSON(dev, ts)}))
			}
			writeTSInfo(a.stdout, dev, ts)
			return nil
		},
	}
}

// writeTSInfo prints time stamping capabilities in ethtool -T's layout (6.1).
func writeTSInfo(w io.Writer, dev string, ts *client.TSInfo) {
	list := func(title string, names []string) {
		if len(names) == 0 {
			fmt.Fprintf(w, "%s none\n", title)
			return
		}
		fmt.Fprintln(w, title)
		for _, n := range names {
			fmt.Fprintf(w, "\t%s\n", n)
		}
	}
	fmt.Fprintf(w, "Time stamping parameters for %s:\n", dev)
	list("Capabilities:", ts.Timestamping)
	if ts.PHCIndex < 0 {
		fmt.Fprintln(w, "PTP Hardware Clock: none")
	} else {
		fmt.Fprintf(w, "PTP Hardware Clock: %d\n", ts.PHCIndex)
	}
	list("Hardware Transmit Timestamp Modes:", ts.TxTypes)
	list("Hardware Receive Filter Modes:", ts.RxFilters)
}

// tsInfoJSON is show-time-stamping; phc-index is null without a PTP hardware clock.
type tsInfoJSON struct {
	IfName       string   `json:"ifname"`
	Capabilities []string `json:"capabilities"`
	PHCIndex     *int32   `json:"phc-index"`
	TxTypes      []string `json:"hardware-transmit-timestamp-modes"`
	RxFilters    []string `json:"hardware-receive-filter-modes"`
}

func tsInfoToJSON(dev string, ts *client.TSInfo) tsInfoJSON {
	out := tsInfoJSON{IfName: dev, Capabilities: nonNil(ts.Timestamping), TxTypes: nonNil(ts.TxTypes), RxFilters: nonNil(ts.RxFilters)}
	if ts.PHCIndex >= 0 {
		out.PHCIndex = &ts.PHCIndex
	}
	return out
}
