package config

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// p builds a keyPath from "port", 1, "mtu"-style components.
func p(parts ...any) keyPath {
	k := root
	for _, c := range parts {
		switch c := c.(type) {
		case string:
			k = k.key(c)
		case int:
			k = k.index(c)
		}
	}
	return k
}

func TestIndexLines(t *testing.T) {
	const doc = `# comment with [[port]] and key = 1
title = "a # not a comment" # comment
[daemon]
socket = """
multi [[port]]
name = "x"
"""
log_level = 'info'

[[port]]
name = "a"
priv_flags = [
  "full-page-rx", # one
  # a comment line
  "b",
]
"quoted.key" = 1
dotted.inner = 2

[[port]] # second
  name = "b"
  mac = '''
'''
  inline = { x = 1, y = [1,
     2] }
[port.sub]
z = 1979-05-27 07:32:00
[[port]]
name = "c\tq"
esc = "\"quoted\" \\"
"a\u0041" = 3
arr = [{ k = 1 }, { k = 2 }]
`
	_, err := toml.Decode(doc, new(map[string]any))
	require.NoError(t, err, "test document is not valid TOML")
	lines := indexLines(doc)
	for _, tc := range []struct {
		path keyPath
		line int
	}{
		{p("title"), 2},
		{p("daemon"), 3},
		{p("daemon", "socket"), 4},
		{p("daemon", "log_level"), 8},
		{p("port", 0), 10},
		{p("port", 0, "name"), 11},
		{p("port", 0, "priv_flags"), 12},
		{p("port", 0, "priv_flags", 0), 13},
		{p("port", 0, "priv_flags", 1), 15},
		{p("port", 0, "quoted.key"), 17},
		{p("port", 0, "dotted"), 18},
		{p("port", 0, "dotted", "inner"), 18},
		{p("port", 1), 20},
		{p("port", 1, "name"), 21},
		{p("port", 1, "mac"), 22},
		{p("port", 1, "inline"), 24},
		{p("port", 1, "inline", "y", 1), 25},
		{p("port", 1, "sub"), 26},
		{p("port", 1, "sub", "z"), 27},
		{p("port", 2), 28},
		{p("port", 2, "name"), 29},
		{p("port", 2, "esc"), 30},
		{p("port", 2, "aA"), 31},
		{p("port", 2, "arr", 1, "k"), 32},
		// Not in the document: the nearest ancestor's line.
		{p("port", 1, "mtu"), 20},
		{p("nowhere"), 0},
	} {
		assert.Equal(t, tc.line, lines.line(tc.path), "line(%q)", strings.ReplaceAll(string(tc.path), "\x00", "/"))
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:            "plain",
		`a\tb\n`:           "a\tb\n",
		`\"q\" \\`:         `"q" \`,
		`\u00e9\U0001F600`: "é😀",
		`\x41\e`:           "A\x1b",
		`bad \q \u12`:      `bad \q \u12`,
	} {
		assert.Equal(t, want, unescape(in), "unescape(%q)", in)
	}
}

// names returns the key names of a path, without array indices: the form BurntSushi's
// MetaData.Keys uses.
func names(k keyPath) []string {
	var out []string
	for _, c := range strings.Split(string(k), "\x00")[1:] {
		if c[0] == 'k' {
			k, err := strconv.Unquote(c[1:])
			if err != nil {
				panic(err)
			}
			out = append(out, k)
		}
	}
	return out
}

// FuzzIndexLines checks that the scanner never panics or hangs, and that on every document the
// real parser accepts it finds every key the parser reports, at a line that holds the key.
func FuzzIndexLines(f *testing.F) {
	f.Add(string(defaultTOML))
	f.Add("a = 1\n[[port]]\nname = \"x\"\n[[port]]\nname = 'y'\n")
	f.Add("x = [\n{a=1},\n{b=\"\"\"\n\"\"\"}]\n")
	f.Add("\"k\\u0041\" = 1\nt = {a.b = 2}\n")
	f.Fuzz(func(t *testing.T, doc string) {
		s := scanLines(doc) // must terminate without panicking whatever doc is
		lines := s.lines
		md, err := toml.Decode(doc, new(map[string]any))
		if err != nil || s.truncated {
			return
		}
		found := map[string]bool{}
		for k := range lines {
			found[strings.Join(names(k), "\x00")] = true
		}
		docLines := strings.Split(doc, "\n")
		for _, k := range md.Keys() {
			require.True(t, found[strings.Join(k, "\x00")], "key %q not located; located: %v", k, keysOf(lines))
		}
		for k, l := range lines {
			require.GreaterOrEqual(t, l, 1, "key %q at line %d, outside the document's %d lines", names(k), l, len(docLines))
			require.LessOrEqual(t, l, len(docLines), "key %q at line %d, outside the document's %d lines", names(k), l, len(docLines))
		}
	})
}

func keysOf(ix lineIndex) []string {
	var out []string
	for k, l := range ix {
		out = append(out, strings.Join(names(k), ".")+"@"+strconv.Itoa(l))
	}
	slices.Sort(out)
	return out
}

// TestIndexLinesDeep checks that deeply nested documents are scanned in linear time: values below
// maxLocateDepth are skipped, not recorded, and the shallow keys around them still are.
func TestIndexLinesDeep(t *testing.T) {
	const depth = 50000 // quadratic path building would allocate ~10 GB here
	doc := "a = " + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n" +
		"b = " + strings.Repeat("{c=", depth) + "1" + strings.Repeat("}", depth) + "\n" +
		strings.Repeat("d.", depth) + "e = 1\n" +
		"[" + strings.Repeat("f.", depth) + "g]\nh = 1\n" +
		"[[port]]\nname = \"x\"\n"
	s := scanLines(doc)
	lines := s.lines
	assert.True(t, s.truncated, "truncated not set")
	assert.LessOrEqual(t, len(lines), 10*maxLocateDepth, "recorded %d positions, want at most a few per level down to %d", len(lines), maxLocateDepth)
	for _, tc := range []struct {
		path keyPath
		line int
	}{{p("a"), 1}, {p("b"), 2}, {p("b", "c", "c"), 2}, {p("d"), 3}, {p("port", 0, "name"), 7}} {
		assert.Equal(t, tc.line, lines.line(tc.path), "line(%q)", names(tc.path))
	}
}
