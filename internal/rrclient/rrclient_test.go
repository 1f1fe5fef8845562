package rrclient

import (
	"bufio"
	"encoding/binary"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestChecksum(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want uint16
	}{
		{"echo request id 1 seq 1, no data", []byte{8, 0, 0, 0, 0, 1, 0, 1}, 0xf7fd},
		{"odd length", []byte{0x01}, 0xfeff},
		{"carries its checksum", []byte{8, 0, 0xf7, 0xfd, 0, 1, 0, 1}, 0},
	} {
		assert.Equal(t, tc.want, Checksum(tc.b), tc.name)
	}
}

// TestIsReply: only an answer to this request counts, and a short or malformed packet is never
// read past its end.
func TestIsReply(t *testing.T) {
	icmp := func(ihl int, typ byte, id, seq uint16) []byte {
		b := make([]byte, ihl*4+8)
		b[0] = 0x40 | byte(ihl)
		b[ihl*4] = typ
		binary.BigEndian.PutUint16(b[ihl*4+4:], id)
		binary.BigEndian.PutUint16(b[ihl*4+6:], seq)
		return b
	}
	udp := make([]byte, Payload)
	binary.BigEndian.PutUint16(udp, 7)
	for _, tc := range []struct {
		name string
		kind string
		b    []byte
		want bool
	}{
		{"icmp reply", ICMP, icmp(5, 0, 1, 7), true},
		{"icmp reply with IP options", ICMP, icmp(6, 0, 1, 7), true},
		{"icmp other seq", ICMP, icmp(5, 0, 1, 8), false},
		{"icmp other id", ICMP, icmp(5, 0, 2, 7), false},
		{"icmp request (own, looped)", ICMP, icmp(5, 8, 1, 7), false},
		{"icmp truncated", ICMP, icmp(5, 0, 1, 7)[:27], false},
		{"icmp header length beyond the packet", ICMP, append([]byte{0x4f}, make([]byte, 30)...), false},
		{"icmp header length below 20", ICMP, append([]byte{0x41}, make([]byte, 30)...), false},
		{"icmp empty", ICMP, nil, false},
		{"udp reply", UDP, udp, true},
		{"udp other seq", UDP, append([]byte{0, 8}, udp[2:]...), false},
		{"udp short", UDP, udp[:10], false},
	} {
		assert.Equal(t, tc.want, isReply(tc.kind, tc.b, 1, 7), tc.name)
	}
}

// TestServeUDP: the client and the parent's side over real sockets, against a UDP echo server
// on loopback: each count gets that many latencies on one line; a bad count or kind fails.
func TestServeUDP(t *testing.T) {
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { echo.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			echo.WriteToUDP(buf[:n], from)
		}
	}()
	port := echo.LocalAddr().(*net.UDPAddr).Port
	lo := net.IPv4(127, 0, 0, 1)

	inR, inW := ioPipe(t)
	outR, outW := ioPipe(t)
	done := make(chan error, 1)
	go func() { done <- Serve("", UDP, lo, lo, port, inR, outW); outW.Close() }()
	c := Client{In: inW, Out: bufio.NewReader(outR)}
	for _, n := range []int{1, 5, 0} {
		lat, err := c.RoundTrips(n)
		require.NoError(t, err, "%d round trips", n)
		require.Len(t, lat, n)
		for _, d := range lat {
			assert.Positive(t, d)
		}
	}
	inW.Close()
	require.NoError(t, <-done)

	err = Serve("", UDP, lo, lo, port, strings.NewReader("x\n"), new(strings.Builder))
	assert.ErrorIs(t, err, unix.EINVAL, "bad count")
	err = Serve("", "tcp", lo, lo, port, strings.NewReader("1\n"), new(strings.Builder))
	assert.ErrorIs(t, err, unix.EINVAL, "bad kind")
}

// ioPipe is an os.Pipe closed at the end of the test.
func ioPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
