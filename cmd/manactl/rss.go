package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// rssHashFuncs are the names of ETH_SS_RSS_HASH_FUNCS, bit i for name i (rss_hash_func_strings).
var rssHashFuncs = []string{"toeplitz", "xor", "crc32"}

// ShowRxfh is a top-level command (see topLevel).
func (t topLevel) ShowRxfh() *cobra.Command { return showRxfhCmd(t.app) }

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
		Annotations:       ethtoolAlias("-x", "--show-rxfh-indir", "--show-rxfh"),
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
	writeRSSTables(w, r)
}

// writeRSSTables is writeRSS after its header line: the table, the key and the hash functions.
func writeRSSTables(w io.Writer, r *client.RSS) {
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

// failRxfhValue is set-rxfh refusing weights or a key that do not fit the device, after reading
// its sizes: ethtool's fill_indir_table and convert_string_to_hashkey return 2.
const failRxfhValue failure = 101

// rxfhValueError is a failRxfhValue; it reads as ethtool's message.
type rxfhValueError struct{ msg string }

func (e *rxfhValueError) Error() string        { return e.msg }
func (e *rxfhValueError) failurePart() failure { return failRxfhValue }

// ethtoolMessage is a failed request reported with ethtool's own message, capital letter and all.
type ethtoolMessage string

func (e ethtoolMessage) Error() string { return string(e) }

// rxfhRequest is set-rxfh's command line (ethtool's struct srss_cmd, netlink/rss.c).
type rxfhRequest struct {
	seen       map[string]bool
	equal      uint32
	start      uint32
	weights    []uint32
	hkey       string
	hfunc      string
	xfrm       uint32
	context    uint32
	contextNew bool
}

func (r *rxfhRequest) has(p string) bool { return r.seen[p] }

// rxfhXfrms are set-rxfh's xfrm values (srss_xfrm_values).
var rxfhXfrms = map[string]uint32{"none": 0, "symmetric-xor": 1, "symmetric-or-xor": 2}

// parseRxfh parses set-rxfh's parameters as ethtool's nl_srss: srss_params, each at most once,
// one of equal, weight, default and delete, then srss_validate_cmd's checks in its order. All
// errors are usage errors.
func parseRxfh(args []string) (*rxfhRequest, error) {
	if len(args) == 0 {
		return nil, usageErrorf("set-rxfh: parameters missing (want equal N, weight W..., default, start N, hkey XX:..., hfunc NAME, xfrm MODE or context N)")
	}
	r := &rxfhRequest{seen: map[string]bool{}}
	table := ""
	for i := 0; i < len(args); i++ {
		p := args[i]
		if r.seen[p] {
			return nil, usageErrorf("set-rxfh: parameter '%s' given twice", p)
		}
		value := func() (string, error) {
			if i+1 >= len(args) {
				return "", usageErrorf("set-rxfh: parameter '%s' needs a value", p)
			}
			i++
			return args[i], nil
		}
		switch p {
		case "equal", "weight", "default", "delete":
			if table != "" {
				return nil, usageErrorf("set-rxfh: '%s' and '%s' are mutually exclusive (one of equal, weight, default, delete)", table, p)
			}
			table = p
		}
		var err error
		var s string
		switch p {
		case "equal", "start":
			if s, err = value(); err == nil {
				var v uint32
				if v, err = parseU32(p, s); p == "equal" {
					r.equal = v
				} else {
					r.start = v
				}
			}
		case "weight":
			for i+1 < len(args) && args[i+1] != "" && args[i+1][0] >= '0' && args[i+1][0] <= '9' {
				i++
				var w uint32
				if w, err = parseU32("weight", args[i]); err != nil {
					break
				}
				r.weights = append(r.weights, w)
			}
			if err == nil && len(r.weights) == 0 {
				err = usageErrorf("set-rxfh: 'weight' requires at least one value")
			}
		case "default", "delete":
		case "hkey":
			r.hkey, err = value()
		case "hfunc":
			r.hfunc, err = value()
		case "xfrm":
			if s, err = value(); err == nil {
				var ok bool
				if r.xfrm, ok = rxfhXfrms[s]; !ok {
					err = usageErrorf("invalid value '%s' for parameter 'xfrm' (want none, symmetric-xor or symmetric-or-xor)", s)
				}
			}
		case "context":
			if s, err = value(); err == nil {
				if s == "new" {
					r.contextNew = true
				} else if r.context, err = parseU32("context", s); err != nil || r.context > 0x7fffffff {
					err = usageErrorf("set-rxfh: invalid 'context' value")
				}
			}
		default:
			err = usageErrorf("set-rxfh: unknown parameter '%s'", p)
		}
		if err != nil {
			return nil, err
		}
		r.seen[p] = true
	}
	const intMax = 1<<31 - 1
	switch {
	case r.has("equal") && (r.equal < 1 || r.equal > intMax):
		return nil, usageErrorf("set-rxfh: invalid 'equal' value")
	case r.has("start") && r.start > intMax:
		return nil, usageErrorf("set-rxfh: invalid 'start' value")
	case r.has("delete") && !r.has("context"):
		return nil, usageErrorf("set-rxfh: delete option requires context option")
	case r.has("delete") && r.contextNew:
		return nil, usageErrorf("set-rxfh: delete and 'context new' are mutually exclusive")
	}
	for _, p := range []string{"hkey", "hfunc", "xfrm", "start"} {
		if r.has("delete") && r.has(p) {
			return nil, usageErrorf("set-rxfh: delete and %s options are mutually exclusive", p)
		}
	}
	switch {
	case r.has("start") && r.has("default"):
		return nil, usageErrorf("set-rxfh: start and default options are mutually exclusive")
	case r.has("start") && !r.has("equal") && !r.has("weight"):
		return nil, usageErrorf("set-rxfh: start must be used with equal or weight options")
	case r.has("default") && r.has("context") && (r.contextNew || r.context != 0):
		return nil, usageErrorf("set-rxfh: default and context options are mutually exclusive")
	}
	return r, nil
}

// rxfhTable is fill_indir_table: the table of size entries equal or weight ask for (starting
// at queue start), or the empty table that asks for the default. Errors: rxfhValueError for
// weights that are all zero or add up to more than the table.
func rxfhTable(r *rxfhRequest, size uint32) ([]uint32, error) {
	t := make([]uint32, size)
	switch {
	case r.has("equal"):
		for i := range t {
			t[i] = r.start + uint32(i)%r.equal
		}
	case r.has("weight"):
		var sum uint64
		for _, w := range r.weights {
			sum += uint64(w)
		}
		if sum == 0 {
			return nil, &rxfhValueError{"At least one weight must be non-zero"}
		}
		if sum > uint64(size) {
			return nil, &rxfhValueError{"Total weight exceeds the size of the indirection table"}
		}
		j, partial := -1, uint64(0)
		for i := range t {
			for uint64(i) >= uint64(size)*partial/sum {
				j++
				partial += uint64(r.weights[j])
			}
			t[i] = r.start + uint32(j)
		}
	default: // "default"
		t = []uint32{}
	}
	return t, nil
}

// rxfhKey is convert_string_to_hashkey: XX:XX:... of exactly size bytes. Errors: rxfhValueError
// with ethtool's messages; a device without a key is a request failure (parse_hkey: 1).
func rxfhKey(s string, size int) ([]byte, error) {
	if size == 0 {
		return nil, ethtoolMessage("Cannot set RX flow hash configuration: Hash key setting not supported")
	}
	key := make([]byte, 0, size)
	for {
		if len(key) > size-1 {
			return nil, &rxfhValueError{fmt.Sprintf("Key is too long for device (%d > %d)", len(key)+1, size)}
		}
		if len(s) < 2 || !isHex(s[0]) || !isHex(s[1]) {
			return nil, &rxfhValueError{"Invalid RSS hash key format"}
		}
		v, _ := strconv.ParseUint(s[:2], 16, 8)
		key, s = append(key, byte(v)), s[2:]
		if strings.HasPrefix(s, ":") {
			s = s[1:]
		} else if s != "" {
			return nil, &rxfhValueError{"Invalid RSS hash key format"}
		}
		if s == "" {
			break
		}
	}
	if len(key) != size {
		return nil, &rxfhValueError{fmt.Sprintf("Key is too short for device (%d < %d)", len(key), size)}
	}
	return key, nil
}

func isHex(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }

// rxfhSet builds and sends the RSS_SET of r on c, as nl_srss: the device's table and key sizes
// from RSS_GET when r needs them, the hash function's bit from its name. A request for a new
// context or to delete one is RSS_CREATE_ACT/RSS_DELETE_ACT, which neither mana nor manad has.
func rxfhSet(ctx context.Context, c *client.Client, dev string, r *rxfhRequest) error {
	ifi := client.Interface{Name: dev}
	if r.contextNew || r.has("delete") {
		return fmt.Errorf("set-rxfh: RSS contexts cannot be created or deleted (the device has only its default context): %w", unix.EOPNOTSUPP)
	}
	var indirSize, keySize int
	if r.has("hkey") || r.has("equal") || r.has("weight") || r.has("default") {
		cur, err := c.RSS(ctx, ifi)
		if err != nil {
			return err
		}
		indirSize, keySize = len(cur.Indir), len(cur.HKey)
	}
	if indirSize == 0 && (r.has("equal") || r.has("weight") || r.has("default")) {
		return ethtoolMessage("Device does not support RX indirection table")
	}
	var u wire.RSSSet
	if r.has("context") {
		u.Context = &r.context
	}
	if r.has("hkey") {
		k, err := rxfhKey(r.hkey, keySize)
		if err != nil {
			return err
		}
		u.HKey = k
	}
	if r.has("hfunc") {
		i := slices.Index(rssHashFuncs, r.hfunc)
		if i < 0 {
			return ethtoolMessage("Unknown hash function: " + r.hfunc)
		}
		u.HFunc = 1 << i
	}
	if r.has("xfrm") {
		u.InputXfrm = &r.xfrm
	}
	if r.has("equal") || r.has("weight") || r.has("default") {
		t, err := rxfhTable(r, uint32(indirSize))
		if err != nil {
			return err
		}
		u.Indir = t
	}
	return c.SetRSS(ctx, ifi, u)
}

// SetRxfh is a top-level command (see topLevel).
func (t topLevel) SetRxfh() *cobra.Command { return setRxfhCmd(t.app) }

// setRxfhCmd is ethtool -X.
func setRxfhCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-rxfh DEV [equal N | weight W0 W1 ... | default] [start N] [hkey XX:XX:...] [hfunc toeplitz] [context 0]",
		Short: "Change the RSS indirection table and hash key (ethtool -X)",
		Long: `Change the RX flow hash indirection table, key or hash function, with ethtool -X's
parameters: equal N spreads the table over queues start .. start+N-1; weight W0 W1 ...
gives queue start+i a share Wi of the entries; default restores the round-robin spread
over all queues; hkey sets the 40-byte Toeplitz key (XX:XX:..., 40 bytes); hfunc names
the hash function (a manad port hashes only with toeplitz). A manad port, as mana, has
only its default context (context 0) and no input transformation (xfrm none). The port
must be up, and an entry may only name one of its queues.

Like the mana driver, the port loses the table you set whenever its queues are rebuilt
(detach/attach): a channel, ring, MTU, XDP or private-flag change, a reset, or down/up
brings back the default spread over the queues. The key is kept. As the kernel's
ethtool core does, once you set a table set-channels refuses fewer queues than the
highest one the table names (also after mana restored the default) until you ask
for the default again with set-rxfh DEV default.`,
		Example: `  manactl -X mana0 equal 2
  manactl -X mana0 weight 1 1 2 start 1
  manactl set-rxfh mana0 hkey 6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa
  manactl -X mana0 default`,
		Args:              devArgs(0, -1),
		ValidArgsFunction: completeDevs(a),
		// --set-rxfh is manactl's own, the counterpart of --show-rxfh.
		Annotations: ethtoolAlias("-X", "--set-rxfh-indir", "--rxfh", "--set-rxfh"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := parseRxfh(args[1:])
			if err != nil {
				return err
			}
			return a.ethtoolDo(cmd.Context(), func(c *client.Client) error {
				return rxfhSet(cmd.Context(), c, args[0], r)
			})
		},
	}
}
