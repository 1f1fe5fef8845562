package offload

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// HeaderLen is the size of a virtio_net_hdr_v1 (TUNSETVNETHDRSZ 12).
const HeaderLen = 12

// Header flags (VIRTIO_NET_HDR_F_*).
const (
	FlagNeedsCsum = 1 // the checksum at CsumStart+CsumOffset is partial: complete it
	FlagDataValid = 2 // the checksums were checked (RX)
)

// GSO types (VIRTIO_NET_HDR_GSO_*).
const (
	GSONone  = 0
	GSOTCPv4 = 1
	GSOUDP   = 3 // UFO: IP fragmentation, not supported
	GSOTCPv6 = 4
	GSOUDPL4 = 5 // USO: UDP segmentation, IPv4 or IPv6
	GSOECN   = 0x80
)

// MaxFrameLen is the largest superframe a TAP hands over (GSO_LEGACY_MAX_SIZE, Ethernet header
// included).
const MaxFrameLen = 65536

// MaxSegments bounds the segments one superframe may produce: a 64 KiB TCP superframe at the
// smallest MSS Linux sends (TCP_MIN_SND_MSS 48) has fewer.
const MaxSegments = 1400

// Header is a virtio_net_hdr_v1.
type Header struct {
	Flags      uint8
	GSOType    uint8
	HdrLen     uint16 // length of the headers before the payload (a hint)
	GSOSize    uint16 // payload bytes per segment
	CsumStart  uint16 // where the checksummed data starts
	CsumOffset uint16 // where the checksum lies, from CsumStart
	NumBuffers uint16 // mergeable RX buffers (unused by a TAP)
}

// Decode reads a header from the start of b. Errors: ErrShortHeader when b is shorter than
// HeaderLen.
func (h *Header) Decode(b []byte) error {
	if len(b) < HeaderLen {
		return ErrShortHeader
	}
	*h = Header{
		Flags: b[0], GSOType: b[1],
		HdrLen:     binary.LittleEndian.Uint16(b[2:]),
		GSOSize:    binary.LittleEndian.Uint16(b[4:]),
		CsumStart:  binary.LittleEndian.Uint16(b[6:]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:]),
		NumBuffers: binary.LittleEndian.Uint16(b[10:]),
	}
	return nil
}

// Encode writes h into b[:HeaderLen]; b must be that long.
func (h Header) Encode(b []byte) {
	_ = b[HeaderLen-1]
	b[0], b[1] = h.Flags, h.GSOType
	binary.LittleEndian.PutUint16(b[2:], h.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], h.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], h.CsumOffset)
	binary.LittleEndian.PutUint16(b[10:], h.NumBuffers)
}

// Reason says why a frame was refused. Every Reason is an error that wraps an errno (EINVAL,
// EMSGSIZE for ErrTooLarge, EOPNOTSUPP for ErrUnsupportedGSO), so callers may test either with
// errors.Is; the data path counts refusals by Reason.
type Reason uint8

// The reasons a frame is refused.
const (
	ErrShortHeader     Reason = iota + 1 // shorter than the virtio header
	ErrUnknownGSOType                    // gso_type is none of the known ones
	ErrUnsupportedGSO                    // UFO (GSO_UDP): a NIC does not fragment
	ErrGSOSizeZero                       // a GSO frame with gso_size 0
	ErrTooLarge                          // a superframe longer than MaxFrameLen
	ErrHdrLenPastFrame                   // hdr_len beyond the frame
	ErrCsumPastEnd                       // csum_start/csum_offset beyond the frame
	ErrCsumMismatch                      // a GSO frame's csum_start is not its L4 header
	ErrMalformed                         // the Ethernet/IP/TCP/UDP headers do not parse or disagree with the length
	ErrProtoMismatch                     // gso_type disagrees with the frame's IP version or L4 protocol
	ErrTooManySegments                   // gso_size so small the frame would exceed MaxSegments
	numReasons
)

var reasonNames = [numReasons]string{"", "short virtio header", "unknown gso_type", "unsupported gso_type (UFO)",
	"gso_size 0", "superframe longer than 64 KiB", "hdr_len past the frame", "csum_start/csum_offset past the frame",
	"csum_start is not the L4 header", "malformed headers", "gso_type does not match the frame",
	"too many segments"}

// NumReasons is one more than the largest Reason, for counter arrays indexed by Reason.
const NumReasons = int(numReasons)

// Error returns the reason's description.
func (r Reason) Error() string {
	if r == 0 || r >= numReasons {
		return fmt.Sprintf("offload reason %d", uint8(r))
	}
	return reasonNames[r]
}

// Unwrap returns the errno the reason stands for.
func (r Reason) Unwrap() error {
	switch r {
	case ErrTooLarge:
		return unix.EMSGSIZE
	case ErrUnsupportedGSO:
		return unix.EOPNOTSUPP
	}
	return unix.EINVAL
}
