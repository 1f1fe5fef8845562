package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/manad/manad/bench/internal/benchrow"
)

// Where a column's figures come from.
const (
	// modelled: computed by manad's model (vnic/rxbuf), no traffic involved.
	modelled = "model"
	// measured: counted or timed on real traffic through real manad ports in this run.
	measured = "measured"
	// thread: the seed thread's own figure, from its author's hardware; never manad's.
	thread = "thread (their hardware)"
)

// column is one column of a seed table.
type column struct {
	name string
	kind string // modelled, measured or thread
	unit string
	// offered names the column holding what the sender offered for this (rate) column; an
	// offered column is a row's Offered in the JSON, not a figure of its own.
	offered string
	offer   bool
}

// cell is one figure of a row: a median over the rounds with its spread, or a text.
type cell struct {
	stat benchrow.Stat
	text string // shown instead of stat when set
	ok   bool   // the cell has a figure
	n    int    // rounds behind a measured figure
}

func num(v float64) cell { return cell{stat: benchrow.Stat{Median: v, Min: v, Max: v}, ok: true} }

func text(s string) cell { return cell{text: s, ok: true} }

// once is a measured figure read once, at the end of the run.
func once(v float64) cell { return over([]float64{v}) }

func over(v []float64) cell {
	if len(v) == 0 {
		return cell{}
	}
	return cell{stat: benchrow.StatOf(v), ok: true, n: len(v)}
}

// row is one line of a seed table: a label and one cell per column.
type row struct {
	label string
	cells map[string]cell // by column name
}

// table is one seed thread's table, in the thread's shape.
type table struct {
	seed    string // "000" … "004", the file name's prefix under shared/seeds
	title   string
	columns []column
	rows    []row
	notes   []string
}

// value returns the median of the cell of row label in column col, and whether there is one.
func (t table) value(label, col string) (float64, bool) {
	for _, r := range t.rows {
		if r.label == label {
			c, ok := r.cells[col]
			return c.stat.Median, ok && c.ok && c.text == ""
		}
	}
	return 0, false
}

// kinds says, for one row, which of its columns are modelled, which measured and which are the
// thread's: "model: a, b; measured: c".
func (t table) kinds(r row) string {
	var parts []string
	for _, k := range []string{modelled, measured, thread} {
		var names []string
		for _, c := range t.columns {
			if c.kind == k && r.cells[c.name].ok {
				names = append(names, c.name)
			}
		}
		switch {
		case len(names) == 0:
		case k == thread: // its header says whose figures they are
			parts = append(parts, "thread's own: "+strings.Join(names, ", "))
		default:
			parts = append(parts, k+": "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// format renders a cell: integers as integers, others with three significant digits, a spread
// when the rounds differ.
func format(c cell) string {
	switch {
	case !c.ok:
		return "–"
	case c.text != "":
		return c.text
	}
	f := func(v float64) string {
		switch a := math.Abs(v); {
		case a == math.Trunc(a) || a >= 100:
			return strconv.FormatFloat(v, 'f', 0, 64)
		case a >= 10:
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	s := c.stat
	if s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s [%s–%s]", f(s.Median), f(s.Min), f(s.Max))
}

// write prints t as a text table: the title, a header naming each column with its unit and kind,
// the rows, each ending with what in it is modelled and what measured, then the notes.
func (t table) write(w io.Writer) {
	fmt.Fprintf(w, "Seed %s: %s\n", t.seed, t.title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := []string{""}
	for _, c := range t.columns {
		h := c.name
		if c.unit != "" {
			h += " (" + c.unit + ")"
		}
		if c.kind != thread { // that column's name says it already
			h += " [" + c.kind + "]"
		}
		hdr = append(hdr, h)
	}
	hdr = append(hdr, "what is what")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, r := range t.rows {
		line := []string{r.label}
		for _, c := range t.columns {
			line = append(line, format(r.cells[c.name]))
		}
		line = append(line, t.kinds(r))
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	tw.Flush()
	for _, n := range t.notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	fmt.Fprintln(w)
}

// senderBound is how close to the offered rate a path must deliver to count as limited by the
// sender rather than by itself (bench/udppps' rule).
const senderBound = 0.95

// benchRows turns t's measured cells into report rows (issue 11): one per row and measured
// column, its peer the same column of the table's first row (the "before" of the thread).
func (t table) benchRows() []benchrow.Row {
	var out []benchrow.Row
	for _, c := range t.columns {
		if c.kind != measured || c.offer {
			continue
		}
		var base cell
		if len(t.rows) > 0 {
			base = t.rows[0].cells[c.name]
		}
		for i, r := range t.rows {
			x, ok := r.cells[c.name]
			if !ok || !x.ok || x.text != "" {
				continue
			}
			br := benchrow.Row{Issue: 11, Figure: fmt.Sprintf("seed %s: %s, %s", t.seed, r.label, c.name),
				Value: x.stat.Median, Min: x.stat.Min, Max: x.stat.Max, Rounds: x.n, Unit: c.unit}
			if i > 0 && base.ok && base.text == "" && base.stat.Median != 0 {
				br.Baseline, br.BaselineName = base.stat.Median, t.rows[0].label+", same run"
				br.Ratio = x.stat.Median / base.stat.Median
				br.RatioMin, br.RatioMax = br.Ratio, br.Ratio
			}
			if off, ok := r.cells[c.offered]; ok && c.offered != "" && off.ok && off.stat.Median > 0 {
				// The path kept up with the sender: the figure is the sender's, a lower bound.
				br.Offered = off.stat.Median
				br.SenderBound = x.stat.Median >= senderBound*off.stat.Median
			}
			out = append(out, br)
		}
	}
	return out
}
