package offload

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrUnmergeable is Aggregate's refusal of a TCP aggregate whose segments a Coalescer would not
// merge back into one superframe: SYN, RST or URG set, IPv4 options or IPv6 extension headers,
// headers longer than a run's, no payload, or an IP packet beyond 64 KiB. It wraps EINVAL.
var ErrUnmergeable = fmt.Errorf("offload: TCP aggregate a coalescer would not merge: %w", unix.EINVAL)

// Aggregate makes frame, a TCP aggregate the kernel handed over in one piece (a GSO packet
// with segments of gsoSize payload bytes, gsoType one of the TCP kinds, the ECN bit allowed),
// the superframe a Coalescer's Flush would have made of the segments it stands for: the IP
// length and IPv4 header checksum are set for the whole frame, and the TCP checksum field to
// the pseudo-header sum that the returned header's NEEDS_CSUM asks the receiver to complete
// (the kernel's tcp_gro_complete leaves it so). Segments says what the frame stands for, as
// Plan says it. As for Segment, the aggregate's own checksums are not trusted: whoever
// completes NEEDS_CSUM computes the segments' afresh.
//
// frame may come from either side of the kernel: a GRO aggregate an uplink's device received,
// or a TSO superframe a port's TAP handed over (its flags those of the whole, PSH and FIN meant
// for the last segment: the coalesced run's too).
//
// Errors: Plan's Reasons, ErrProtoMismatch for a frame that is not TCP, and ErrUnmergeable for
// one whose segments a Coalescer would not merge; frame is then unchanged.
func Aggregate(frame []byte, gsoType uint8, gsoSize uint16) (Header, Segments, error) {
	h := Header{GSOType: gsoType, GSOSize: gsoSize}
	if gt := gsoType &^ GSOECN; gt != GSOTCPv4 && gt != GSOTCPv6 {
		return Header{}, Segments{}, ErrProtoMismatch
	}
	l, err := check(&h, frame)
	if err != nil {
		return Header{}, Segments{}, err
	}
	if !mergeableShape(frame, &l) || len(frame)-l.l3 > maxCoalesced {
		return Header{}, Segments{}, ErrUnmergeable
	}
	st := plan(&h, frame, &l)
	return l.tcpSuperframe(frame, len(frame), gsoType, gsoSize), st, nil
}
