// Package rrclient is the client of the request-response round-trip benchmarks (the data path's
// BenchmarkRoundTrip rows and bench/uringfloor): a helper process that makes round trips one
// after the other, blocking in read(2) for each reply as ping and netperf's TCP_RR do, and the
// parent's side of the line protocol between them. The parent writes a count K on a line; the
// client makes K round trips and prints their latencies in nanoseconds on one line.
package rrclient

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/internal/nsrun"
)

// Payload is a request's size: for ICMP an echo's 8-byte header and ping's default 56 bytes.
const Payload = 64

// The kinds of round trip.
const (
	UDP  = "udp"  // a datagram to an echo server at the destination's port, which sends it back
	ICMP = "icmp" // an echo request, which the destination's kernel answers
)

// Serve is the client process: it opens a socket of kind in namespace ns ("" for its own) bound
// to src and connected to dst (port for UDP), then for each count read from a line of in makes
// that many round trips and writes their latencies to out. A reply that does not come within a
// second fails it. It returns at the end of in; errors: a bad kind or count, the socket's.
func Serve(ns, kind string, src, dst net.IP, port int, in io.Reader, out io.Writer) error {
	var to unix.SockaddrInet4
	copy(to.Addr[:], dst.To4())
	from := &unix.SockaddrInet4{}
	copy(from.Addr[:], src.To4())
	fd := -1
	err := nsrun.In(ns, func() (err error) {
		switch kind {
		case UDP:
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			to.Port = port
		case ICMP:
			fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		default:
			return fmt.Errorf("round-trip kind %q is not %s or %s: %w", kind, UDP, ICMP, unix.EINVAL)
		}
		return err
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(time.Second))
	if err := unix.Bind(fd, from); err != nil {
		return err
	}
	if err := unix.Connect(fd, &to); err != nil {
		return err
	}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	id := uint16(os.Getpid())
	req := make([]byte, Payload)
	if kind == ICMP {
		req[0] = 8 // echo request
		binary.BigEndian.PutUint16(req[4:], id)
	}
	buf := make([]byte, 2048)
	sc := bufio.NewScanner(in)
	w := bufio.NewWriter(out)
	var seq uint16
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil || n < 0 {
			return fmt.Errorf("count %q: %w", sc.Text(), unix.EINVAL)
		}
		for i := range n {
			seq++
			if kind == ICMP {
				binary.BigEndian.PutUint16(req[6:], seq)
				req[2], req[3] = 0, 0
				binary.BigEndian.PutUint16(req[2:], Checksum(req))
			} else {
				binary.BigEndian.PutUint16(req, seq)
			}
			t0 := time.Now()
			if err := unix.Send(fd, req, 0); err != nil {
				return err
			}
			for {
				m, err := unix.Read(fd, buf)
				if err == unix.EINTR {
					continue
				}
				if err != nil {
					return fmt.Errorf("round trip %d: %w", i, err)
				}
				if isReply(kind, buf[:m], id, seq) {
					break
				}
			}
			if i > 0 {
				w.WriteByte(' ')
			}
			w.WriteString(strconv.FormatInt(int64(time.Since(t0)), 10))
		}
		w.WriteByte('\n')
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

// isReply reports whether b, read from the client's socket, answers request seq: for UDP the
// datagram back, for ICMP (an IPv4 packet, raw) an echo reply with the client's id.
func isReply(kind string, b []byte, id, seq uint16) bool {
	if kind == UDP {
		return len(b) == Payload && binary.BigEndian.Uint16(b) == seq
	}
	if len(b) < 20 {
		return false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl+8 {
		return false
	}
	icmp := b[ihl:]
	return icmp[0] == 0 && binary.BigEndian.Uint16(icmp[4:]) == id && binary.BigEndian.Uint16(icmp[6:]) == seq
}

// Client is the parent's side of a running client process: its stdin and stdout.
type Client struct {
	In  io.Writer
	Out *bufio.Reader
}

// RoundTrips has the client make n round trips and returns their latencies. Errors: the
// client's output ended, or it is not n latencies.
func (c Client) RoundTrips(n int) ([]time.Duration, error) {
	if _, err := fmt.Fprintln(c.In, n); err != nil {
		return nil, err
	}
	line, err := c.Out.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != n {
		return nil, fmt.Errorf("client printed %d latencies, not %d", len(f), n)
	}
	out := make([]time.Duration, n)
	for i, s := range f {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("client printed %q: %w", s, err)
		}
		out[i] = time.Duration(v)
	}
	return out, nil
}

// Checksum is the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
