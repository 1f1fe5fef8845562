package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

// Standard statistics groups (`stats DEV --all-groups`, `--groups G…`): STATS_GET, printed as
// ethtool 6.1 prints them (netlink/stats.c: stats_reply_cb, parse_grp, parse_rmon_hist). A mana
// port, like a veth or a tun, implements none of the groups: the reply names each requested
// group with no counter, and ethtool prints only the "Standard stats for DEV:" line (its JSON
// has an empty object per group).

// stdStatsView is a STATS_GET reply with the names it needs: the groups' (ETH_SS_STATS_STD) and,
// for each group with counters, its string set's.
type stdStatsView struct {
	dev    string
	st     *client.StdStats
	std    []string
	counts map[uint32][]string // by string set id
}

// stdStats runs STATS_GET for groups (nil: all) and fetches the names of what it returned.
func stdStats(ctx context.Context, c *client.Client, dev string, groups []string) (*stdStatsView, error) {
	st, err := c.StdStats(ctx, client.Interface{Name: dev}, groups)
	if err != nil {
		return nil, err
	}
	v := &stdStatsView{dev: dev, st: st, counts: map[uint32][]string{}}
	if v.std, err = c.StringSet(ctx, client.Interface{}, ethtool.SSStatsStd); err != nil {
		return nil, err
	}
	for _, g := range st.Groups {
		if len(g.Stats) == 0 {
			continue
		}
		if _, ok := v.counts[g.SSID]; !ok {
			if v.counts[g.SSID], err = c.StringSet(ctx, client.Interface{}, g.SSID); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// setString returns entry i of set, or "" (ethtool's get_string of an entry it does not have).
func setString(set []string, i int) string {
	if i < 0 || i >= len(set) {
		return ""
	}
	return set[i]
}

// write prints the reply as stats_reply_cb: the header line, then per group its counters as
// "GROUP-NAME: VALUE" (counters without a name are skipped, as parse_stat does) and the RMON
// histogram buckets as "rx-GROUP-etherStatsPkts64to64Octets: VALUE".
func (v *stdStatsView) write(w io.Writer) {
	fmt.Fprintf(w, "Standard stats for %s:\n", v.dev)
	for _, g := range v.st.Groups {
		grp := setString(v.std, int(g.ID))
		for _, s := range g.Stats {
			if n := setString(v.counts[g.SSID], int(s.Index)); n != "" {
				fmt.Fprintf(w, "%s-%s: %d\n", grp, n, s.Value)
			}
		}
		for _, h := range []struct {
			dir string
			bkt []wire.HistBucket
		}{{"rx", g.HistRx}, {"tx", g.HistTx}} {
			for _, b := range h.bkt {
				fmt.Fprintf(w, "%s-%s-etherStatsPkts", h.dir, grp)
				switch {
				case b.Low != 0 && b.High != 0:
					fmt.Fprintf(w, "%dto%dOctets: %d\n", b.Low, b.High, b.Value)
				case b.High != 0:
					fmt.Fprintf(w, "%dOctets: %d\n", b.High, b.Value)
				default:
					fmt.Fprintf(w, "%dtoMaxOctets: %d\n", b.Low, b.Value)
				}
			}
		}
	}
}

// MarshalJSON writes {"ifname": DEV, "GROUP": {"NAME": VALUE, …, "rx-pktsNtoM": [{"low": L,
// "high": H, "val": V}, …]}, …} with the groups and counters in reply order, as ethtool --json
// does (encoding/json would sort map keys).
func (v *stdStatsView) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	key := func(k string) {
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
	}
	b.WriteByte('{')
	key("ifname")
	dev, _ := json.Marshal(v.dev)
	b.Write(dev)
	for _, g := range v.st.Groups {
		b.WriteByte(',')
		key(setString(v.std, int(g.ID)))
		b.WriteByte('{')
		first := true
		sep := func() {
			if !first {
				b.WriteByte(',')
			}
			first = false
		}
		for _, s := range g.Stats {
			if n := setString(v.counts[g.SSID], int(s.Index)); n != "" {
				sep()
				key(n)
				b.WriteString(strconv.FormatUint(s.Value, 10))
			}
		}
		for _, h := range []struct {
			key string
			bkt []wire.HistBucket
		}{{"rx-pktsNtoM", g.HistRx}, {"tx-pktsNtoM", g.HistTx}} {
			if len(h.bkt) == 0 {
				continue
			}
			sep()
			key(h.key)
			b.WriteByte('[')
			for i, bk := range h.bkt {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"low":%d,"high":%d,"val":%d}`, bk.Low, bk.High, bk.Value)
			}
			b.WriteByte(']')
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
