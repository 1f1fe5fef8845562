package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/manad/manad/genl/wire"
)

// testFrame is an Ethernet frame from src to dst with ethertype et, n bytes long.
func testFrame(dst, src string, et uint16, n int) []byte {
	f := make([]byte, n)
	copy(f, mustMAC(dst))
	copy(f[6:], mustMAC(src))
	f[12], f[13] = byte(et>>8), byte(et)
	for i := 14; i < n; i++ {
		f[i] = byte(i)
	}
	return f
}

func mustMAC(s string) []byte {
	var b [6]byte
	for i := range b {
		var v byte
		for _, c := range s[i*3 : i*3+2] {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= byte(c - '0')
			default:
				v |= byte(c-'a') + 10
			}
		}
		b[i] = v
	}
	return b[:]
}

// TestPcapRoundTrip: what the pcap writer writes, pcapgo's reader reads back: the header
// (Ethernet, the snapshot length, nanosecond timestamps) and each record's time, lengths and
// bytes, a cut frame's original length included.
func TestPcapRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 1, 2, 3, 456789123, time.UTC)
	frames := []wire.CaptureFrame{
		{Time: uint64(t0.UnixNano()), Dir: wire.CaptureOut, Member: "mana0", OrigLen: 98, Data: testFrame("ff:ff:ff:ff:ff:ff", "02:4d:41:4e:41:01", 0x0800, 98)},
		{Time: uint64(t0.Add(time.Millisecond).UnixNano()), Dir: wire.CaptureIn, Member: "mana0", OrigLen: 1514, Data: testFrame("02:4d:41:4e:41:01", "02:4d:41:4e:41:02", 0x86dd, 96)},
		{Time: uint64(t0.Add(2 * time.Second).UnixNano()), Dir: wire.CaptureIn, Member: "uplink:vx0", OrigLen: 60, Data: testFrame("02:4d:41:4e:41:01", "02:00:00:00:00:09", 0x0806, 60)},
	}
	var buf bytes.Buffer
	w := newPcapWriter(&buf)
	require.NoError(t, w.begin(1514))
	for i := range frames {
		require.NoError(t, w.frame(&frames[i]))
	}
	require.NoError(t, w.flush())
	// The nanosecond magic (pcapgo v1.1.19's Reader.Resolution has it backwards, so look at
	// the bytes); the timestamps below keep their nanoseconds.
	magic := binary.LittleEndian.Uint32(buf.Bytes())
	assert.Equal(t, uint32(0xa1b23c4d), magic, "magic %#x, want the nanosecond pcap magic 0xa1b23c4d", magic)
	r, err := pcapgo.NewReader(&buf)
	require.NoError(t, err)
	assert.Equal(t, layers.LinkTypeEthernet, r.LinkType(), "header: link type %v, snaplen %d; want Ethernet, 1514", r.LinkType(), r.Snaplen())
	assert.Equal(t, uint32(1514), r.Snaplen(), "header: link type %v, snaplen %d; want Ethernet, 1514", r.LinkType(), r.Snaplen())
	for i, f := range frames {
		data, ci, err := r.ReadPacketData()
		require.NoError(t, err, "record %d", i)
		assert.True(t, ci.Timestamp.Equal(time.Unix(0, int64(f.Time))), "record %d: time %v, want %v", i, ci.Timestamp, time.Unix(0, int64(f.Time)))
		assert.Equal(t, len(f.Data), ci.CaptureLength, "record %d: captured length", i)
		assert.Equal(t, int(f.OrigLen), ci.Length, "record %d: length", i)
		assert.Equal(t, string(f.Data), string(data), "record %d: bytes", i)
	}
	_, _, err = r.ReadPacketData()
	assert.ErrorIs(t, err, io.EOF, "after the last record: %v, want EOF", err)
}

// TestSummaryLine: the one-line summary of a frame.
func TestSummaryLine(t *testing.T) {
	ts := uint64(time.Date(2026, 12, 2, 1, 2, 3, 456789000, time.Local).UnixNano())
	for _, tc := range []struct {
		f    wire.CaptureFrame
		want string
	}{
		{wire.CaptureFrame{Time: ts, Dir: wire.CaptureOut, Member: "mana0", OrigLen: 98, Data: testFrame("ff:ff:ff:ff:ff:ff", "02:4d:41:4e:41:01", 0x0800, 98)},
			"01:02:03.456789 mana0 Out 02:4d:41:4e:41:01 > ff:ff:ff:ff:ff:ff, ethertype IPv4 (0x0800), length 98"},
		{wire.CaptureFrame{Time: ts, Dir: wire.CaptureIn, Member: "uplink:vx0", OrigLen: 1514, Data: testFrame("02:4d:41:4e:41:01", "02:00:00:00:00:09", 0x86dd, 34)},
			"01:02:03.456789 uplink:vx0 In 02:00:00:00:00:09 > 02:4d:41:4e:41:01, ethertype IPv6 (0x86dd), length 1514"},
		{wire.CaptureFrame{Time: ts, Dir: wire.CaptureIn, Member: "p", OrigLen: 64, Data: testFrame("01:80:c2:00:00:00", "02:00:00:00:00:01", 0x0026, 64)},
			"01:02:03.456789 p In 02:00:00:00:00:01 > 01:80:c2:00:00:00, ethertype 802.3 (0x0026), length 64"},
		{wire.CaptureFrame{Time: ts, Dir: wire.CaptureOut, Member: "p", OrigLen: 60, Data: testFrame("02:00:00:00:00:02", "02:00:00:00:00:01", 0x88b5, 60)},
			"01:02:03.456789 p Out 02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype Unknown (0x88b5), length 60"},
		{wire.CaptureFrame{Time: ts, Dir: wire.CaptureOut, Member: "p", OrigLen: 60, Data: make([]byte, 10)},
			"01:02:03.456789 p Out [|ether], length 60"},
	} {
		assert.Equal(t, tc.want, summaryLine(&tc.f), "summary")
	}
}

// TestCaptureLoop: the loop stops at -c frames (cutting a batch), ends without an error when its
// context ends (an interrupt), and reports a failed read otherwise.
func TestCaptureLoop(t *testing.T) {
	batch := func(n int) []wire.CaptureFrame {
		fs := make([]wire.CaptureFrame, n)
		for i := range fs {
			fs[i] = wire.CaptureFrame{Dir: wire.CaptureIn, Member: "p", OrigLen: 60, Data: testFrame("02:00:00:00:00:02", "02:00:00:00:00:01", 0x0800, 60)}
		}
		return fs
	}
	broken := errors.New("manad closed the connection")
	for _, tc := range []struct {
		name    string
		batches [][]wire.CaptureFrame
		end     error // what next returns after the batches
		cancel  bool  // the context ends instead
		count   int
		want    int
		wantErr error
	}{
		{"count cuts a batch", [][]wire.CaptureFrame{batch(2), batch(5)}, broken, false, 3, 3, nil},
		{"interrupted", [][]wire.CaptureFrame{batch(2)}, nil, true, 0, 2, nil},
		{"connection lost", [][]wire.CaptureFrame{batch(4)}, broken, false, 10, 4, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			i := 0
			next := func(ctx context.Context) ([]wire.CaptureFrame, error) {
				if i < len(tc.batches) {
					i++
					return tc.batches[i-1], nil
				}
				if tc.cancel {
					cancel()
					return nil, ctx.Err()
				}
				return nil, tc.end
			}
			var out bytes.Buffer
			n, err := captureLoop(ctx, next, &summaryWriter{w: bufio.NewWriter(&out)}, tc.count)
			assert.Equal(t, tc.want, n, "wrote %d frames, err %v; want %d, %v", n, err, tc.want, tc.wantErr)
			assert.ErrorIs(t, err, tc.wantErr, "wrote %d frames, err %v; want %d, %v", n, err, tc.want, tc.wantErr)
			lines := strings.Count(out.String(), "\n")
			assert.Equal(t, tc.want, lines, "%d lines written, want %d:\n%s", lines, tc.want, out.String())
		})
	}
}

// TestCaptureUsage: bad capture command lines are usage errors, before manad is asked; a
// capture needs manad.
func TestCaptureUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"capture"}, "accepts 1 arg(s), received 0"},
		{[]string{"capture", "wire0", "--direction", "up"}, `--direction must be in, out or inout, not "up"`},
		{[]string{"capture", "wire0", "-c", "-1"}, "-c must be positive"},
		{[]string{"capture", "wire0", "-s", "70000"}, "--snaplen 70000 exceeds 65000"},
		{[]string{"--json", "capture", "wire0"}, "--json does not apply"},
		{[]string{"--kernel", "capture", "wire0"}, "capture is a manad command"},
	} {
		code, _, stderr := runCLI(t, sock, tc.args...)
		assert.Equal(t, exitUsage, code, "%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.msg)
		assert.Contains(t, stderr, tc.msg, "%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.msg)
	}
	file := filepath.Join(t.TempDir(), "x.pcap")
	code, _, stderr := runCLI(t, sock, "capture", "wire0", "-w", file)
	assert.Equal(t, exitFailure, code, "capture without manad: exit %d, stderr %q", code, stderr)
	assert.Contains(t, stderr, "cannot connect to manad", "capture without manad: exit %d, stderr %q", code, stderr)
	_, err := os.Stat(file)
	assert.ErrorIs(t, err, os.ErrNotExist, "a failed capture left %s behind", file)
}
