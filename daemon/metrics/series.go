package metrics

import (
	"github.com/manad/manad/daemon/datapath"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/manad/manad/vnic"
)

// reasonHelp begins the help of each family whose series carry a reason label ("…, by reason:
// "); the reasons' explanations (their rows' Help) follow, in table order.
var reasonHelp = map[string]string{
	"rx_dropped_total": "Frames for the RX queue that were lost",
	"tx_dropped_total": "Frames the host transmitted that were lost",
}

// CounterHelp says what the counter c counts in a sentence: its Help, or for a row that is a
// reason of a family, the family's subject and the reason ("Frames the host transmitted that were
// lost: the port was down or being reconfigured.").
func CounterHelp[S any](c *vnic.Counter[S]) string {
	if h, ok := reasonHelp[c.Metric]; ok && c.Reason != "" {
		return h + ": " + c.Help + "."
	}
	return c.Help
}

// family is one per-queue Prometheus family made of counter rows.
type family struct {
	desc   *prometheus.Desc
	gauge  bool
	reason bool
}

// families are the per-queue families of the counter tables, by name and in order of first use.
type families struct {
	byName map[string]*family
	order  []string
}

// series is one counter row's series: its family and its reason label.
type series[S any] struct {
	fam    *family
	reason string
	c      *vnic.Counter[S]
}

// rowMeta is what a family needs of a row, whatever its snapshot type.
type rowMeta struct {
	metric, reason, help string
	gauge                bool
}

// metaOf returns what the families need of the rows of tables that have a Metric, in order.
func metaOf[S any](tables ...[]vnic.Counter[S]) []rowMeta {
	var out []rowMeta
	for _, cs := range tables {
		for i := range cs {
			if c := &cs[i]; c.Metric != "" {
				out = append(out, rowMeta{c.Metric, c.Reason, c.Help, c.Gauge})
			}
		}
	}
	return out
}

// queueFamilies makes the families of every row with a Metric in the counter tables (vnic's, the
// data path's, the page pools', the rings' and the pollers'): a family's help is its row's Help, or for a family with reasons its
// reasonHelp followed by each reason and its row's Help. d makes a family's description.
func queueFamilies(reasonLabels, queueLabels []string, d func(name, help string, labels []string) *prometheus.Desc) families {
	rows := slices.Concat(metaOf(vnic.ManaCounters, vnic.ManadCounters), metaOf(datapath.Counters), metaOf(poolCounters),
		metaOf(ringCounters), metaOf(pollCounters))
	fs := families{byName: map[string]*family{}}
	reasons := map[string][]string{}
	help := map[string]string{}
	for _, r := range rows {
		if _, ok := help[r.metric]; !ok {
			fs.order = append(fs.order, r.metric)
			help[r.metric] = r.help
		}
		if r.reason != "" {
			reasons[r.metric] = append(reasons[r.metric], r.reason+" ("+r.help+")")
		}
		fs.byName[r.metric] = &family{gauge: r.gauge, reason: r.reason != ""}
	}
	for _, name := range fs.order {
		f := fs.byName[name]
		if f.reason {
			f.desc = d(name, reasonHelp[name]+", by reason: "+strings.Join(reasons[name], ", ")+".", reasonLabels)
		} else {
			f.desc = d(name, help[name], queueLabels)
		}
	}
	return fs
}

// seriesOf returns the series of the rows of tables that have a Metric.
func seriesOf[S any](fs families, tables ...[]vnic.Counter[S]) []series[S] {
	var out []series[S]
	for _, cs := range tables {
		for i := range cs {
			if c := &cs[i]; c.Metric != "" {
				out = append(out, series[S]{fam: fs.byName[c.Metric], reason: c.Reason, c: c})
			}
		}
	}
	return out
}

// collectSeries sends the value of each series read from one queue's snapshot s, labelled l
// (port, netns, queue) and its reason.
func collectSeries[S any](ch chan<- prometheus.Metric, ss []series[S], s *S, l []string) {
	for _, x := range ss {
		t := prometheus.CounterValue
		if x.fam.gauge {
			t = prometheus.GaugeValue
		}
		labels := l
		if x.fam.reason {
			labels = append(l[:len(l):len(l)], x.reason)
		}
		v := float64(x.c.Read(s))
		if x.c.Scale != 0 {
			v *= x.c.Scale
		}
		ch <- prometheus.MustNewConstMetric(x.fam.desc, t, v, labels...)
	}
}
