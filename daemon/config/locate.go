package config

import (
	"strconv"
	"strings"
)

// keyPath names a key or array element of a TOML document, with the index of every array of
// tables on the way: the mtu of the second [[port]] is root.key("port").index(1).key("mtu").
// Components are separated by NUL; a key is quoted (strconv.Quote), so even a key holding a NUL
// cannot be mistaken for two.
type keyPath string

const root keyPath = ""

func (p keyPath) key(k string) keyPath { return p + "\x00k" + keyPath(strconv.Quote(k)) }
func (p keyPath) index(i int) keyPath  { return p + "\x00i" + keyPath(strconv.Itoa(i)) }
func (p keyPath) parent() (keyPath, bool) {
	i := strings.LastIndexByte(string(p), 0)
	if i < 0 {
		return root, false
	}
	return p[:i], true
}

// lineIndex maps the keys and array elements of a TOML document to the line they start on.
//
// BurntSushi/toml parses the document and reports the line of a syntax error, but its metadata
// keeps one position per dotted key name, so every [[port]]'s "mtu" shares the position of the
// last one. To name the right line in a semantic error, indexLines walks the text again after the
// parser accepted it and records where each key starts, with array-of-tables indices in the path.
type lineIndex map[keyPath]int

// line returns the line of p, or of its nearest recorded ancestor (a key's table when the key
// itself is missing), or 0.
func (ix lineIndex) line(p keyPath) int {
	for {
		if l, ok := ix[p]; ok {
			return l
		}
		var ok bool
		if p, ok = p.parent(); !ok {
			return 0
		}
	}
}

// lineScanner is a minimal TOML tokenizer: it understands exactly as much of TOML 1.1 (headers,
// dotted and quoted keys, the four string forms, arrays, inline tables, comments) as it takes to
// find where keys begin. It is only run on text the real parser accepted; on anything else it
// still terminates and never panics, it just records less.
type lineScanner struct {
	src    string
	i      int
	line   int
	depth  int // nesting of arrays, inline tables and dotted keys below the current table
	lines  lineIndex
	arrays map[keyPath]int // how many [[x]] headers each array of tables has had so far
	table  keyPath         // the table the following key/value pairs belong to
	// truncated is set when something nested deeper than maxLocateDepth was skipped.
	truncated bool
}

// maxLocateDepth bounds the nesting the scanner records: a configuration needs two levels
// (port → priv_flags → element), and building paths for deeper documents would take time
// quadratic in their depth. Deeper values are skipped, not recorded.
const maxLocateDepth = 32

// indexLines returns the line of every key, table and array element in src, down to
// maxLocateDepth levels.
func indexLines(src string) lineIndex { return scanLines(src).lines }

func scanLines(src string) *lineScanner {
	s := &lineScanner{src: src, line: 1, lines: lineIndex{}, arrays: map[keyPath]int{}}
	for {
		s.skipBlank(true)
		if s.eof() {
			return s
		}
		start := s.i
		if s.peek() == '[' {
			s.header()
		} else {
			s.keyValue(s.table)
		}
		// A header or key/value pair ends its line; what is left is blanks or a comment.
		for !s.eof() && s.peek() != '\n' {
			s.i++
		}
		if s.i == start {
			s.i++
		}
	}
}

func (s *lineScanner) eof() bool { return s.i >= len(s.src) }

func (s *lineScanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

// skipBlank skips spaces, tabs, comments and, with newlines set, line breaks.
func (s *lineScanner) skipBlank(newlines bool) {
	for !s.eof() {
		switch s.src[s.i] {
		case ' ', '\t', '\r':
			s.i++
		case '\n':
			if !newlines {
				return
			}
			s.line++
			s.i++
		case '#':
			for !s.eof() && s.src[s.i] != '\n' {
				s.i++
			}
		default:
			return
		}
	}
}

// header reads "[a.b]" or "[[a.b]]" and makes it the current table. Every component that names an
// array of tables resolves to its latest element, as TOML requires.
func (s *lineScanner) header() {
	line := s.line
	s.i++
	array := s.peek() == '['
	if array {
		s.i++
	}
	keys := s.keys()
	if len(keys) > maxLocateDepth {
		s.truncated = true
		s.table = "\x00x" // no key or index has this component: what is recorded under it is never looked up
		return
	}
	p := root
	for j, k := range keys {
		p = p.key(k)
		if array && j == len(keys)-1 {
			n := s.arrays[p]
			s.arrays[p] = n + 1
			p = p.index(n)
		} else if n := s.arrays[p]; n > 0 {
			p = p.index(n - 1)
		}
	}
	s.lines[p] = line
	s.table = p
}

// keyValue reads "a.b = value" in table t.
func (s *lineScanner) keyValue(t keyPath) {
	line := s.line
	keys := s.keys()
	s.skipBlank(false)
	if s.peek() == '=' {
		s.i++
	}
	s.skipBlank(false)
	p := t
	depth := s.depth
	for _, k := range keys {
		if s.depth++; s.depth > maxLocateDepth {
			s.truncated = true
			break
		}
		p = p.key(k)
		if _, ok := s.lines[p]; !ok {
			s.lines[p] = line
		}
	}
	if s.depth <= maxLocateDepth {
		s.lines[p] = line
	}
	s.value(p)
	s.depth = depth
}

// keys reads a dotted key.
func (s *lineScanner) keys() []string {
	var keys []string
	for {
		s.skipBlank(false)
		k, ok := s.simpleKey()
		if !ok {
			return keys
		}
		keys = append(keys, k)
		s.skipBlank(false)
		if s.peek() != '.' {
			return keys
		}
		s.i++
	}
}

// simpleKey reads a bare or quoted key.
func (s *lineScanner) simpleKey() (string, bool) {
	switch c := s.peek(); {
	case c == '"' || c == '\'':
		return s.str(), true
	case isBareKeyChar(c):
		start := s.i
		for !s.eof() && isBareKeyChar(s.src[s.i]) {
			s.i++
		}
		return s.src[start:s.i], true
	}
	return "", false
}

func isBareKeyChar(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value, recording the elements of arrays and the keys of inline tables under p.
func (s *lineScanner) value(p keyPath) {
	switch s.peek() {
	case '"', '\'':
		s.str()
	case '[':
		s.array(p)
	case '{':
		s.inlineTable(p)
	default:
		// Numbers, booleans, dates and times (which may contain one space).
		for !s.eof() && !strings.ContainsRune(",]}#\n", rune(s.src[s.i])) {
			s.i++
		}
	}
}

func (s *lineScanner) array(p keyPath) {
	s.i++
	s.depth++
	defer func() { s.depth-- }()
	for n := 0; ; n++ {
		s.skipBlank(true)
		if s.eof() {
			return
		}
		if s.peek() == ']' {
			s.i++
			return
		}
		start := s.i
		if s.depth > maxLocateDepth {
			s.truncated = true
			s.value(p) // too deep to record: just skip it
		} else {
			s.lines[p.index(n)] = s.line
			s.value(p.index(n))
		}
		s.skipBlank(true)
		if s.peek() == ',' {
			s.i++
		} else if s.i == start {
			s.i++
		}
	}
}

func (s *lineScanner) inlineTable(p keyPath) {
	s.i++
	for {
		s.skipBlank(true) // TOML 1.1 allows newlines inside inline tables
		if s.eof() {
			return
		}
		if s.peek() == '}' {
			s.i++
			return
		}
		start := s.i
		s.keyValue(p)
		s.skipBlank(true)
		if s.peek() == ',' {
			s.i++
		} else if s.i == start {
			s.i++
		}
	}
}

// str skips a string of any of the four forms and returns its text, escapes decoded for the
// single-line basic form (the only one a key can have besides the literal form).
func (s *lineScanner) str() string {
	q := s.src[s.i]
	triple := strings.Repeat(string(q), 3)
	if strings.HasPrefix(s.src[s.i:], triple) {
		s.i += 3
		start := s.i
		for !s.eof() {
			c := s.src[s.i]
			switch {
			case c == '\\' && q == '"':
				if s.i+1 < len(s.src) && s.src[s.i+1] == '\n' {
					s.line++
				}
				s.i += 2
			case c == '\n':
				s.line++
				s.i++
			case strings.HasPrefix(s.src[s.i:], triple):
				// Up to two more quotes belong to the content: `"""a""""` is `a"`.
				end := s.i
				s.i += 3
				for n := 0; n < 2 && s.peek() == q; n++ {
					s.i++
					end++
				}
				return s.src[start:end]
			default:
				s.i++
			}
		}
		return s.src[start:]
	}
	s.i++
	start := s.i
	for !s.eof() {
		c := s.src[s.i]
		switch {
		case c == '\\' && q == '"':
			s.i += 2
		case c == q:
			raw := s.src[start:s.i]
			s.i++
			if q == '"' {
				return unescape(raw)
			}
			return raw
		case c == '\n':
			return s.src[start:s.i] // unterminated: invalid TOML, stop at the line end
		default:
			s.i++
		}
	}
	return s.src[start:min(s.i, len(s.src))]
}

// unescape decodes the escapes of a TOML basic string (\b \t \n \f \r \e \" \\ \xHH \uHHHH
// \UHHHHHHHH). A malformed escape is kept as written.
func unescape(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := raw[i]; e {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"', '\\':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			n := 2 // hex digits
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if i+n < len(raw) {
				if r, err := strconv.ParseUint(raw[i+1:i+1+n], 16, 32); err == nil {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String()
}
