package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/daemon/datapath"
)

// readmeFamily is a row's claim about one family in README's Metrics table.
type readmeFamily struct {
	typ    string
	labels []string
}

// readmeMetrics reads the table of README.md's "## Metrics" section: each family the rows name
// (a row may name several), with the row's type and labels.
func readmeMetrics(t *testing.T) map[string]readmeFamily {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, sec, ok := strings.Cut(string(b), "\n## Metrics\n")
	require.True(t, ok, "README.md has no ## Metrics section")
	sec, _, _ = strings.Cut(sec, "\n## ")
	name := regexp.MustCompile("`(manad_[a-z0-9_]+)`")
	out := map[string]readmeFamily{}
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`manad_") {
			continue
		}
		var labels []string
		for _, l := range strings.Split(cells[3], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		names := name.FindAllStringSubmatch(cells[1], -1)
		// Every name in the first cell must be whole: a shorthand such as `_rx_bytes_total`
		// would not be checked.
		require.Equal(t, strings.Count(cells[1], "`")/2, len(names), "README Metrics row names a family by a shorthand: %s", cells[1])
		for _, m := range names {
			require.NotContains(t, out, m[1], "README Metrics lists %s twice", m[1])
			out[m[1]] = readmeFamily{typ: strings.TrimSpace(cells[2]), labels: labels}
		}
	}
	require.NotEmpty(t, out, "README's Metrics table has no rows")
	return out
}

// TestREADMEMetricsTable: README's Metrics table names every family manad serves, and only those,
// with its type and labels as the collectors declare them. A family added to a counter table, a
// collector or a label set without its README row fails it.
func TestREADMEMetricsTable(t *testing.T) {
	ctl := NewControl()
	ctl.Request("ethtool", "rings-get", 0)
	ctl.SetBusyPolls(func() BusyPolls { return BusyPolls{Hits: 1} })
	ports := func() []Port {
		ps := testPorts()
		ps[0].Polls = []datapath.PollStats{{}}
		return ps
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(SourceFunc(ports), ctl), NewSegmentCollector(SegmentSourceFunc(testSegments)))
	fams, err := reg.Gather()
	require.NoError(t, err)

	// Every declared family must have a sample here, else the check below would miss it.
	descs := make(chan *prometheus.Desc, 512)
	NewCollector(SourceFunc(ports), ctl).Describe(descs)
	NewSegmentCollector(SegmentSourceFunc(testSegments)).Describe(descs)
	close(descs)
	gathered := map[string]bool{}
	for _, f := range fams {
		gathered[f.GetName()] = true
	}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		require.NotNil(t, m, "a Desc without fqName: %s", d)
		assert.True(t, gathered[m[1]], "%s has no sample in the test sources: extend testPorts/testSegments", m[1])
	}

	readme := readmeMetrics(t)
	typ := map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge",
		dto.MetricType_HISTOGRAM: "histogram"}
	for _, f := range fams {
		row, ok := readme[f.GetName()]
		if !assert.True(t, ok, "README's Metrics table has no row for %s (%s)", f.GetName(), f.GetHelp()) {
			continue
		}
		delete(readme, f.GetName())
		assert.Equal(t, typ[f.GetType()], row.typ, "%s: README's type", f.GetName())
		var labels []string
		for _, lp := range f.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		slices.Sort(labels)
		assert.Equal(t, labels, row.labels, "%s: README's labels", f.GetName())
	}
	assert.Empty(t, readme, "README's Metrics table names families manad does not serve")
}
