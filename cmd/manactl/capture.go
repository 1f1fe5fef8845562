package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/wire"
)

// stopTimeout bounds CAPTURE_STOP after the capture ended (an interrupt, -c reached): the frames
// manad still has queued and its counters.
const stopTimeout = 5 * time.Second

// Capture is a top-level command (see topLevel).
func (t topLevel) Capture() *cobra.Command { return captureCmd(t.app) }

func captureCmd(a *app) *cobra.Command {
	var (
		file      string
		count     int
		direction string
		snaplen   uint32
	)
	cmd := &cobra.Command{
		Use:   "capture SEG|PORT",
		Short: "Capture what a wire segment or a port carries, as pcap (tcpdump -w) or one line per frame",
		Long: `Capture the frames a wire segment or a port carries, until interrupted (Ctrl-C,
SIGTERM) or -c frames were captured. SEG|PORT is a port the caller can see (as
list shows it), else a segment; a port wins over a segment of the same name.
A port capture sees the frames the port sends (out) and those the wire delivers
to it (in), before its RX ring, XDP or the kernel; --direction picks one. A
segment capture sees every frame once, as it enters the segment, with the port
or uplink ("uplink:DEV") that sent it.

With -w FILE (or -w - for standard output) the frames are written as a pcap file
(nanosecond timestamps, Ethernet) that tcpdump -r and Wireshark read; the file is
complete when manactl ends, interrupted or not. A port capture ends, with exit
status 1, when the port is deleted. Without -w, one line per frame:
time, port, direction, source > destination MAC, ethertype, length.

Admin only (root or manad's admin_group): other users' traffic is a privilege,
as tcpdump needs CAP_NET_RAW. manad never slows the wire for a capture: frames a
reader is too slow for are dropped and counted, and the end reports them, as
tcpdump reports "packets dropped by kernel". A uid runs at most 4 captures at
once, a connection one.`,
		Example: `  manactl capture wire0 -w wire0.pcap
  ip netns exec manaA manactl capture mana0 -c 10
  manactl capture mana0 --direction in -w - | tcpdump -n -r -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.json {
				return usageErrorf("capture writes pcap (-w) or text: --json does not apply")
			}
			req := wire.CaptureRequest{Target: args[0], Snaplen: snaplen}
			switch direction {
			case "", "inout":
			case "in":
				req.Direction = wire.CaptureIn
			case "out":
				req.Direction = wire.CaptureOut
			default:
				return usageErrorf("--direction must be in, out or inout, not %q", direction)
			}
			if count < 0 {
				return usageErrorf("-c must be positive")
			}
			if snaplen > wire.MaxSnaplen {
				return usageErrorf("--snaplen %d exceeds %d", snaplen, wire.MaxSnaplen)
			}
			c, err := a.dialManad("capture")
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			cp, err := c.StartCapture(ctx, req)
			if err != nil {
				return failed(err)
			}
			defer cp.Close()
			// The file is created once manad has accepted the capture: a refused one leaves
			// whatever FILE was alone (tcpdump -w truncates it only once the capture opens).
			var out frameWriter
			var closeFile func() error
			switch file {
			case "":
				out = &summaryWriter{w: bufio.NewWriter(a.stdout)}
			case "-":
				out = newPcapWriter(a.stdout)
			default:
				f, err := os.Create(file)
				if err != nil {
					return failed(err)
				}
				closeFile = f.Close
				defer f.Close()
				out = newPcapWriter(f)
			}
			info := cp.Info()
			if err := out.begin(info.Snaplen); err != nil {
				return failed(err)
			}
			fmt.Fprintf(a.stderr, "listening on %s (%s), link-type EN10MB (Ethernet), snapshot length %d bytes\n",
				info.Target, info.Kind, info.Snaplen)
			n, runErr := captureLoop(ctx, cp.Next, out, count)
			stopCtx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			rest, st, stopErr := cp.Stop(stopCtx)
			for i := range rest {
				if count > 0 && n >= count {
					break
				}
				if err := out.frame(&rest[i]); err != nil {
					return failed(err)
				}
				n++
			}
			if err := out.flush(); err != nil {
				return failed(err)
			}
			if closeFile != nil {
				if err := closeFile(); err != nil {
					return failed(err)
				}
			}
			fmt.Fprintf(a.stderr, "%d packets captured\n", n)
			if stopErr == nil {
				fmt.Fprintf(a.stderr, "%d packets received by filter\n%d packets dropped by manad\n", st.Matched, st.Dropped)
			}
			if runErr != nil {
				return failed(runErr)
			}
			if stopErr != nil && ctx.Err() == nil {
				return failed(stopErr)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "write", "w", "", "write the frames as pcap to `FILE` (- for standard output)")
	f.IntVarP(&count, "count", "c", 0, "stop after `N` frames (0: until interrupted)")
	f.StringVar(&direction, "direction", "", "a port's frames `in` (delivered to it), out (sent by it), or inout (both, the default)")
	f.Uint32VarP(&snaplen, "snaplen", "s", 0, "keep the first `BYTES` of each frame (0: all)")
	return cmd
}

// captureLoop writes the frames next returns until ctx ends (the normal end), count frames were
// written (count > 0) or next fails. It returns how many frames it wrote.
func captureLoop(ctx context.Context, next func(context.Context) ([]wire.CaptureFrame, error), out frameWriter, count int) (int, error) {
	n := 0
	for count == 0 || n < count {
		frames, err := next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return n, nil // interrupted
			}
			return n, err
		}
		for i := range frames {
			if count > 0 && n >= count {
				break
			}
			if err := out.frame(&frames[i]); err != nil {
				return n, err
			}
			n++
		}
		// Each batch goes out at once: `-w - | tcpdump -r -` and a file being read follow.
		if err := out.flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// frameWriter is where captured frames go: a pcap file or the summary lines.
type frameWriter interface {
	begin(snaplen uint32) error
	frame(f *wire.CaptureFrame) error
	flush() error
}

// pcapWriter writes the classic pcap format with nanosecond timestamps (magic a1b23c4d), which
// tcpdump, Wireshark and libpcap read. It is written here rather than with gopacket's pcapgo:
// pcapgo pulls in gopacket/layers, whose package initialisation alone took 19 ms of every
// manactl start (GODEBUG=inittrace=1) — twice under manactl exec, and once per udev event —
// for a 24-byte file header and a 16-byte record header. The tests read its files back with
// pcapgo's reader and with tcpdump.
type pcapWriter struct {
	buf *bufio.Writer
	hdr [16]byte
}

// Link type and magic of the nanosecond-resolution format (pcap-savefile(5)).
const (
	pcapMagicNanos    = 0xa1b23c4d
	pcapLinkEthernet  = 1
	pcapVersionMajor  = 2
	pcapVersionMinor  = 4
	pcapFileHeaderLen = 24
)

func newPcapWriter(w io.Writer) *pcapWriter {
	return &pcapWriter{buf: bufio.NewWriterSize(w, 256<<10)}
}

func (p *pcapWriter) begin(snaplen uint32) error {
	var h [pcapFileHeaderLen]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], pcapMagicNanos)
	le.PutUint16(h[4:], pcapVersionMajor)
	le.PutUint16(h[6:], pcapVersionMinor)
	// thiszone and sigfigs stay 0
	le.PutUint32(h[16:], snaplen)
	le.PutUint32(h[20:], pcapLinkEthernet)
	_, err := p.buf.Write(h[:])
	return err
}

func (p *pcapWriter) frame(f *wire.CaptureFrame) error {
	orig := max(int(f.OrigLen), len(f.Data)) // a record never claims less than it holds
	le := binary.LittleEndian
	le.PutUint32(p.hdr[0:], uint32(f.Time/1e9))
	le.PutUint32(p.hdr[4:], uint32(f.Time%1e9))
	le.PutUint32(p.hdr[8:], uint32(len(f.Data)))
	le.PutUint32(p.hdr[12:], uint32(orig))
	if _, err := p.buf.Write(p.hdr[:]); err != nil {
		return err
	}
	_, err := p.buf.Write(f.Data)
	return err
}

func (p *pcapWriter) flush() error { return p.buf.Flush() }

// summaryWriter prints one tcpdump -e style line per frame:
//
//	12:34:56.789012 mana0 Out 02:4d:41:4e:41:01 > ff:ff:ff:ff:ff:ff, ethertype ARP (0x0806), length 42
type summaryWriter struct{ w *bufio.Writer }

func (s *summaryWriter) begin(uint32) error { return nil }

func (s *summaryWriter) frame(f *wire.CaptureFrame) error {
	_, err := s.w.WriteString(summaryLine(f) + "\n")
	return err
}

func (s *summaryWriter) flush() error { return s.w.Flush() }

// summaryLine is a frame's summary line; a frame too short for an Ethernet header says so.
func summaryLine(f *wire.CaptureFrame) string {
	ts := time.Unix(0, int64(f.Time)).Format("15:04:05.000000")
	dir := "In"
	if f.Dir == wire.CaptureOut {
		dir = "Out"
	}
	d := f.Data
	if len(d) < 14 {
		return fmt.Sprintf("%s %s %s [|ether], length %d", ts, f.Member, dir, f.OrigLen)
	}
	et := binary.BigEndian.Uint16(d[12:14])
	return fmt.Sprintf("%s %s %s %s > %s, ethertype %s (%#04x), length %d", ts, f.Member, dir,
		net.HardwareAddr(d[6:12]), net.HardwareAddr(d[0:6]), etherTypeName(et), et, f.OrigLen)
}

// etherTypeName names the ethertypes tcpdump -e names most often.
func etherTypeName(et uint16) string {
	switch et {
	case 0x0800:
		return "IPv4"
	case 0x0806:
		return "ARP"
	case 0x86dd:
		return "IPv6"
	case 0x8100:
		return "802.1Q"
	case 0x88a8:
		return "802.1Q-QinQ"
	case 0x88cc:
		return "LLDP"
	}
	if et < 0x0600 {
		return "802.3"
	}
	return "Unknown"
}
