package uplink

import (
	"encoding/binary"

	"github.com/manad/manad/daemon/datapath"
	"github.com/manad/manad/daemon/offload"
)

// vnetHdrLen is the size of struct virtio_net_hdr, which PACKET_VNET_HDR puts before each frame
// (no num_buffers: offload.HeaderLen is the TAP's v1 header).
const vnetHdrLen = 10

// vnetHdr is what the kernel says about a frame that is really several (GSO): the segment size
// its stack chose, and of which kind (VIRTIO_NET_HDR_GSO_*, the ECN bit included).
type vnetHdr struct {
	gsoType byte
	gsoSize int
}

func parseVnetHdr(b []byte) vnetHdr {
	if len(b) < vnetHdrLen {
		return vnetHdr{}
	}
	return vnetHdr{gsoType: b[1], gsoSize: int(binary.LittleEndian.Uint16(b[4:]))}
}

// segmentAggregate cuts a GSO aggregate (a TSO, USO or GRO superframe the kernel handed over
// in one piece) into the frames it stands for with seg, the TAP data path's segmenter, and
// calls emit with each (valid during the call). It reports false, emitting nothing, for a frame
// without GSO or one the segmenter refuses, and when a segment would carry more than mtu bytes
// beyond its Ethernet header and VLAN tags. The frame's partial checksum, if any, is not
// trusted: every segment's is computed afresh.
func segmentAggregate(seg *offload.Segmenter, frame []byte, vh vnetHdr, mtu int, emit func([]byte)) bool {
	if vh.gsoType&^offload.GSOECN == offload.GSONone || vh.gsoSize <= 0 || vh.gsoSize > 0xffff {
		return false
	}
	h := offload.Header{GSOType: vh.gsoType, GSOSize: uint16(vh.gsoSize)}
	st, err := seg.Plan(&h, frame)
	if err != nil {
		return false
	}
	l2 := len(frame) - datapath.PayloadLen(frame)
	if st.HeaderLen-l2+min(vh.gsoSize, st.PayloadLen) > mtu {
		return false
	}
	_, err = seg.Segment(&h, frame, emit)
	return err == nil
}
