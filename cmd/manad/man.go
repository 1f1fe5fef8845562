package main

import (
	"fmt"
	"strings"
	"time"
)

// manPage is manad(8) in roff, made from the usage text (one source for --help and the manual).
// The usage text is laid out as a manual page: a heading per section at the left margin, the
// body indented four spaces. SYNOPSIS and EXAMPLES are kept as they are; a section whose first
// line has a two-space gap (OPTIONS, SIGNALS) is a list, each line with a gap starting an item
// ("--config FILE   read ...") and deeper-indented lines continuing it; any other section is
// filled text, blank lines separating paragraphs.
func manPage(usage string, date time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"MANAD\" \"8\" \"%s\" \"manad\" \"System Manager's Manual\"\n.nh\n", date.Format("January 2006"))
	section, list, verbatim := "", false, false
	endVerbatim := func() {
		if verbatim {
			b.WriteString(".fi\n")
			verbatim = false
		}
	}
	lines := strings.Split(strings.TrimRight(usage, "\n"), "\n")
	for i, l := range lines {
		body := strings.TrimPrefix(l, "    ")
		switch {
		case l != "" && l[0] != ' ':
			endVerbatim()
			section = strings.TrimSpace(l)
			fmt.Fprintf(&b, ".SH %s\n", roffEscape(section))
			list = i+1 < len(lines) && itemGap(strings.TrimPrefix(lines[i+1], "    ")) > 0
			if section == "SYNOPSIS" || section == "EXAMPLES" {
				b.WriteString(".nf\n")
				verbatim = true
			}
		case verbatim:
			fmt.Fprintf(&b, "%s\n", roffEscape(body))
		case strings.TrimSpace(l) == "":
			if !list {
				b.WriteString(".PP\n")
			}
		case section == "NAME":
			name, what, _ := strings.Cut(strings.TrimSpace(l), " - ")
			fmt.Fprintf(&b, "%s \\- %s\n", roffEscape(name), roffEscape(what))
		case list && body != "" && body[0] != ' ' && itemGap(body) > 0:
			gap := itemGap(body)
			fmt.Fprintf(&b, ".TP\n%s\n%s\n", roffTag(body[:gap]), roffEscape(strings.TrimSpace(body[gap:])))
		default:
			fmt.Fprintf(&b, "%s\n", roffEscape(strings.TrimSpace(l)))
		}
	}
	endVerbatim()
	return b.String()
}

// itemGap is where a list item's description starts (after its tag and a run of two or more
// spaces), or 0 when s is not an item.
func itemGap(s string) int {
	i := strings.Index(s, "  ")
	if i <= 0 {
		return 0
	}
	return i + len(s[i:]) - len(strings.TrimLeft(s[i:], " "))
}

// roffTag sets an item's tag: options in bold, their arguments in italics ("--config FILE").
func roffTag(tag string) string {
	words := strings.Fields(tag)
	for i, w := range words {
		comma := strings.HasSuffix(w, ",")
		w = strings.TrimSuffix(w, ",")
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "SIG") {
			w = `\fB` + roffEscape(w) + `\fR`
		} else {
			w = `\fI` + roffEscape(w) + `\fR`
		}
		if comma {
			w += ","
		}
		words[i] = w
	}
	return strings.Join(words, " ")
}

// roffEscape makes s literal text on a roff line: backslashes and minus signs escaped, and a
// leading control character neutralised.
func roffEscape(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
