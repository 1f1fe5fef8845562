package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/client"
)

// rssHashFuncs are the names of ETH_SS_RSS_HASH_FUNCS, bit i for name i (rss_hash_func_strings).
var rssHashFuncs = []string{"toeplitz", "xor", "crc32"}

// showRxfhCmd is ethtool -x.
func showRxfhCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-rxfh DEV",
		Short: "Show the RSS indirection table and hash key (ethtool -x)",
		Long: `Show the RX flow hash indirection table, the hash key and the hash function, as
ethtool -x (6.1) prints them. A manad port hashes with Toeplitz over a 40-byte key
and a 64-entry table. Like the mana driver, the port restores the default table
(round-robin over the queues) whenever its queues are rebuilt: a channel, ring,
MTU, XDP or private-flag change, a reset, or down/up. The key is kept.`,
		Example: `  manactl -x mana0
  manactl --json show-rxfh mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			var r *client.RSS
			var rings uint32
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ifi := client.Interface{Name: args[0]}
				if r, err = c.RSS(cmd.Context(), ifi); err != nil {
					return err
				}
				ch, err := c.Channels(cmd.Context(), ifi)
				if err != nil {
					return err
				}
				rings = ch.Combined + ch.Rx // get_rxnfc(ETHTOOL_GRXRINGS) of mana: num_queues
				return nil
			})
			if err != nil {
				return err
			}
			dev := ifname(r.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []rssJSON{rssToJSON(dev, r)}))
			}
			writeRSS(a.stdout, dev, rings, r)
			return nil
		},
	}
}

// writeRSS prints RSS in ethtool -x's layout (6.1: print_indir_table, print_rss_hkey).
func writeRSS(w io.Writer, dev string, rings uint32, r *client.RSS) {
	fmt.Fprintf(w, "RX flow hash indirection table for %s with %d RX ring(s):\n", dev, rings)
	if len(r.Indir) == 0 {
		fmt.Fprintln(w, "Operation not supported")
	}
	for i, q := range r.Indir {
		if i%8 == 0 {
			fmt.Fprintf(w, "%5d: ", i)
		}
		fmt.Fprintf(w, " %5d", q)
		if i%8 == 7 || i == len(r.Indir)-1 {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w, "RSS hash key:")
	if len(r.HKey) == 0 {
		fmt.Fprintln(w, "Operation not supported")
	} else {
		fmt.Fprintln(w, hexKey(r.HKey))
	}
	fmt.Fprintln(w, "RSS hash function:")
	for i, n := range rssHashFuncs {
		state := "off"
		if r.HFunc&(1<<i) != 0 {
			state = "on"
		}
		fmt.Fprintf(w, "    %s: %s\n", n, state)
	}
}

func hexKey(k []byte) string {
	parts := make([]string, len(k))
	for i, b := range k {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

// rssJSON is show-rxfh as ethtool 6.1's dump_json_rss_info writes it.
type rssJSON struct {
	IfName   string   `json:"ifname"`
	Indir    []uint32 `json:"rss-indirection-table,omitempty"`
	HashKey  string   `json:"rss-hash-key,omitempty"`
	HashFunc string   `json:"rss-hash-function,omitempty"`
}

func rssToJSON(dev string, r *client.RSS) rssJSON {
	out := rssJSON{IfName: dev, Indir: r.Indir}
	if len(r.HKey) > 0 {
		out.HashKey = hexKey(r.HKey)
	}
	for i, n := range rssHashFuncs {
		if r.HFunc&(1<<i) != 0 {
			out.HashFunc = n
			break
		}
	}
	return out
}
