// Package offload is the part of a NIC that does TCP segmentation, UDP segmentation and checksum
// offload on transmit and receive coalescing (GRO) on receive, for frames that carry a
// virtio_net_hdr_v1 as a TAP with IFF_VNET_HDR reads and writes them.
//
// On TX the kernel hands a userspace NIC one superframe of up to 64 KiB with a header that says
// how to cut it (Header: gso_type, gso_size, hdr_len) and where a partial checksum must be
// completed (csum_start, csum_offset). Segmenter checks that header against the frame (every
// inconsistency is a Reason, never a panic) and emits the wire-sized frames a NIC would put on
// the wire: TCP over IPv4/IPv6 with sequence numbers advanced, the IPv4 ID incremented, CWR on
// the first segment only and PSH/FIN on the last only; UDP (USO) datagrams with their own
// lengths; every IP and L4 checksum computed.
//
// On RX, Coalescer merges consecutive in-order TCP segments of one flow, as the kernel's GRO
// does, into one superframe header plus the segments' payloads as an iovec list, for one writev
// to the TAP; the payloads are not copied.
//
// Both are pure: no system calls, no allocation after construction, no shared state. A
// Segmenter or a Coalescer belongs to one goroutine (one queue).
//
// The header fields are little-endian: a TAP uses the virtio 1.0 layout on little-endian
// machines and with TUNSETVNETLE elsewhere.
package offload
