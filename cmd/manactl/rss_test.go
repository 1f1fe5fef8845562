package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// TestWriteRSS checks ethtool -x's layout: eight entries a row behind a "%5u: " index, the key
// as colon-separated hex, one line per hash function.
func TestWriteRSS(t *testing.T) {
	r := &client.RSS{RSS: wire.RSS{HFunc: 1, Indir: make([]uint32, 10), HKey: []byte{0x6d, 0x5a, 0x01}}}
	for i := range r.Indir {
		r.Indir[i] = uint32(i % 3)
	}
	var b bytes.Buffer
	writeRSS(&b, "mana0", 3, r)
	want := "RX flow hash indirection table for mana0 with 3 RX ring(s):\n" +
		"    0:      0     1     2     0     1     2     0     1\n" +
		"    8:      2     0\n" +
		"RSS hash key:\n6d:5a:01\n" +
		"RSS hash function:\n    toeplitz: on\n    xor: off\n    crc32: off\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	writeRSS(&b, "veth0", 1, &client.RSS{})
	if !strings.Contains(b.String(), "ring(s):\nOperation not supported\nRSS hash key:\nOperation not supported\n") {
		t.Errorf("no table, no key:\n%s", b.String())
	}
	j, err := json.Marshal(rssToJSON("mana0", r))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ifname":"mana0","rss-indirection-table":[0,1,2,0,1,2,0,1,2,0],"rss-hash-key":"6d:5a:01","rss-hash-function":"toeplitz"}`; string(j) != want {
		t.Errorf("json %s, want %s", j, want)
	}
}
