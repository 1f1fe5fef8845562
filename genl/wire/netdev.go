package wire

import (
	"fmt"
	"time"

	"github.com/manad/manad/genl/nlattr"
)

// The kernel's netdev generic netlink family, numbered as
// include/uapi/linux/netdev.h of Linux 6.12 (generated from
// Documentation/netlink/specs/netdev.yaml); golang.org/x/sys/unix has none
// of these.
const (
	NetdevFamilyName    = "netdev"
	NetdevFamilyVersion = 1
	NetdevGroupMgmt     = "mgmt"
	NetdevGroupPagePool = "page-pool"
)

// NetdevXDPActNames names the bits of xdp-features (enum netdev_xdp_act), by
// netdev.yaml's names.
var NetdevXDPActNames = [...]string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}

// xdp-features' bits for the XDP actions a driver runs (NETDEV_XDP_ACT_BASIC: XDP_PASS, XDP_DROP,
// XDP_TX and XDP_ABORTED; _REDIRECT: XDP_REDIRECT; _NDO_XMIT: it is a redirect target,
// ndo_xdp_xmit).
const (
	NetdevXDPActBasic    = 1 << 0
	NetdevXDPActRedirect = 1 << 1
	NetdevXDPActNDOXmit  = 1 << 2
)

// NetdevXDPActXSKZeroCopy is xdp-features' bit for AF_XDP zero-copy (NETDEV_XDP_ACT_XSK_ZEROCOPY):
// the driver runs an XSK socket on its own RX buffers, without copying frames into the UMEM.
const NetdevXDPActXSKZeroCopy = 1 << 3

// NetdevXDPActList names the set bits of xdp-features (netdev.yaml's xdp-act), unknown ones as
// "bit N", in bit order; none is an empty list.
func NetdevXDPActList(v uint64) []string {
	out := []string{}
	for i := range 64 {
		if v&(1<<i) == 0 {
			continue
		}
		if i < len(NetdevXDPActNames) {
			out = append(out, NetdevXDPActNames[i])
		} else {
			out = append(out, fmt.Sprintf("bit %d", i))
		}
	}
	return out
}

// enum netdev_queue_type and netdev_qstats_scope.
const (
	NetdevQueueTypeRX      = 0
	NetdevQueueTypeTX      = 1
	NetdevQStatsScopeQueue = 1
)

// Commands (NETDEV_CMD_*).
const (
	NetdevCmdDevGet            = 1
	NetdevCmdDevAddNtf         = 2
	NetdevCmdDevDelNtf         = 3
	NetdevCmdDevChangeNtf      = 4
	NetdevCmdPagePoolGet       = 5
	NetdevCmdPagePoolAddNtf    = 6
	NetdevCmdPagePoolDelNtf    = 7
	NetdevCmdPagePoolChangeNtf = 8
	NetdevCmdPagePoolStatsGet  = 9
	NetdevCmdQueueGet          = 10
	NetdevCmdNAPIGet           = 11
	NetdevCmdQStatsGet         = 12
	NetdevCmdBindRX            = 13
	NetdevCmdNAPISet           = 14 // Linux 6.13
	NetdevCmdBindTX            = 15 // Linux 6.15
)

// NETDEV_A_DEV_*.
const (
	NetdevADevIfindex               = 1
	NetdevADevPad                   = 2
	NetdevADevXDPFeatures           = 3
	NetdevADevXDPZCMaxSegs          = 4
	NetdevADevXDPRxMetadataFeatures = 5
	NetdevADevXSKFeatures           = 6
	NetdevADevMax                   = 6
)

// NETDEV_A_PAGE_POOL_*.
const (
	NetdevAPagePoolID          = 1
	NetdevAPagePoolIfindex     = 2
	NetdevAPagePoolNAPIID      = 3
	NetdevAPagePoolInflight    = 4
	NetdevAPagePoolInflightMem = 5
	NetdevAPagePoolDetachTime  = 6
	NetdevAPagePoolDmabuf      = 7
	NetdevAPagePoolMax         = 7
)

// NETDEV_A_PAGE_POOL_STATS_* (the counters start at 8).
const (
	NetdevAPagePoolStatsInfo                  = 1
	NetdevAPagePoolStatsAllocFast             = 8
	NetdevAPagePoolStatsAllocSlow             = 9
	NetdevAPagePoolStatsAllocSlowHighOrder    = 10
	NetdevAPagePoolStatsAllocEmpty            = 11
	NetdevAPagePoolStatsAllocRefill           = 12
	NetdevAPagePoolStatsAllocWaive            = 13
	NetdevAPagePoolStatsRecycleCached         = 14
	NetdevAPagePoolStatsRecycleCacheFull      = 15
	NetdevAPagePoolStatsRecycleRing           = 16
	NetdevAPagePoolStatsRecycleRingFull       = 17
	NetdevAPagePoolStatsRecycleReleasedRefcnt = 18
	NetdevAPagePoolStatsMax                   = 18
)

// NETDEV_A_NAPI_*.
const (
	NetdevANAPIIfindex = 1
	NetdevANAPIID      = 2
	NetdevANAPIIRQ     = 3
	NetdevANAPIPID     = 4
	// Since 6.13 (defer-hard-irqs, gro-flush-timeout), 6.14 (irq-suspend-timeout) and 6.17
	// (threaded).
	NetdevANAPIDeferHardIRQs     = 5
	NetdevANAPIGROFlushTimeout   = 6
	NetdevANAPIIRQSuspendTimeout = 7
	NetdevANAPIThreaded          = 8
	NetdevANAPIMax               = 8
)

// NETDEV_NAPI_THREADED_* (enum netdev_napi_threaded).
const (
	NetdevNAPIThreadedDisabled = 0
	NetdevNAPIThreadedEnabled  = 1
)

// NETDEV_A_QUEUE_*.
const (
	NetdevAQueueID      = 1
	NetdevAQueueIfindex = 2
	NetdevAQueueType    = 3
	NetdevAQueueNAPIID  = 4
	NetdevAQueueDmabuf  = 5
	NetdevAQueueMax     = 5
)

// NETDEV_A_QSTATS_* (the counters start at 8).
const (
	NetdevAQStatsIfindex          = 1
	NetdevAQStatsQueueType        = 2
	NetdevAQStatsQueueID          = 3
	NetdevAQStatsScope            = 4
	NetdevAQStatsRxPackets        = 8
	NetdevAQStatsRxBytes          = 9
	NetdevAQStatsTxPackets        = 10
	NetdevAQStatsTxBytes          = 11
	NetdevAQStatsRxAllocFail      = 12
	NetdevAQStatsRxHwDrops        = 13
	NetdevAQStatsRxHwDropOverruns = 14
	NetdevAQStatsMax              = 34 // NETDEV_A_QSTATS_TX_WAKE
)

// Uint is a variable-width unsigned attribute (NLA_UINT, nla_put_uint): 4
// bytes when the value fits, else 8; either is read.
func Uint[T any](typ uint16, p func(*T) *uint64) Field[T] {
	return Field[T]{typ: typ, kind: KindU64,
		put: func(b *nlattr.Builder, v *T) {
			if x := *p(v); x <= 0xffffffff {
				b.PutU32(typ, uint32(x))
			} else {
				b.PutU64(typ, x)
			}
		},
		get: func(a nlattr.Attr, v *T) error {
			switch len(a.Data) {
			case 4:
				*p(v) = uint64(a.U32())
			default:
				if err := short(a, 8); err != nil {
					return err
				}
				*p(v) = a.U64()
			}
			return nil
		},
		zero: func(v *T) bool { return *p(v) == 0 },
	}
}

// NetdevDev is a dev-get reply (netdev_nl_dev_fill).
type NetdevDev struct {
	Ifindex               uint32
	XDPFeatures           uint64 // NETDEV_XDP_ACT_* bits
	XDPRxMetadataFeatures uint64
	XSKFeatures           uint64
}

// NetdevDevTable writes a NetdevDev as the kernel does (u64s without pad on
// 64-bit hosts).
var NetdevDevTable = NewTable(
	U32(NetdevADevIfindex, func(v *NetdevDev) *uint32 { return &v.Ifindex }),
	U64(NetdevADevXDPFeatures, func(v *NetdevDev) *uint64 { return &v.XDPFeatures }),
	U64(NetdevADevXDPRxMetadataFeatures, func(v *NetdevDev) *uint64 { return &v.XDPRxMetadataFeatures }),
	U64(NetdevADevXSKFeatures, func(v *NetdevDev) *uint64 { return &v.XSKFeatures }),
)

// NetdevQueue is a queue-get reply (netdev_nl_queue_fill_one).
type NetdevQueue struct {
	ID, Type, Ifindex uint32
	NAPIID            uint32 // 0: none, left out
}

// NetdevQueueTable writes a NetdevQueue in the kernel's order.
var NetdevQueueTable = NewTable(
	U32(NetdevAQueueID, func(v *NetdevQueue) *uint32 { return &v.ID }),
	U32(NetdevAQueueType, func(v *NetdevQueue) *uint32 { return &v.Type }),
	U32(NetdevAQueueIfindex, func(v *NetdevQueue) *uint32 { return &v.Ifindex }),
	U32(NetdevAQueueNAPIID, func(v *NetdevQueue) *uint32 { return &v.NAPIID }).OmitZero(),
)

// NetdevNAPI is a napi-get reply (netdev_nl_napi_fill_one of 6.18); manad's
// NAPIs have no IRQ and no thread, so neither is sent. The per-NAPI
// settings are sent always, as the kernel's: a NAPI nobody configured has
// them all 0 (threading disabled, no deferral, no timeouts).
type NetdevNAPI struct {
	ID, Ifindex uint32
	// Threaded is NETDEV_NAPI_THREADED_* (napi_get_threaded).
	Threaded uint64
	// DeferHardIRQs is napi_defer_hard_irqs (an s32 on the wire, 0..S32_MAX).
	DeferHardIRQs uint32
	// IRQSuspendTimeout and GROFlushTimeout are in nanoseconds.
	IRQSuspendTimeout, GROFlushTimeout uint64
}

// NetdevNAPITable writes a NetdevNAPI in the kernel's order (ID, ifindex,
// [IRQ], threaded, [PID], defer-hard-irqs, irq-suspend-timeout,
// gro-flush-timeout), the unsigned settings as nla_put_uint.
var NetdevNAPITable = NewTable(
	U32(NetdevANAPIID, func(v *NetdevNAPI) *uint32 { return &v.ID }),
	U32(NetdevANAPIIfindex, func(v *NetdevNAPI) *uint32 { return &v.Ifindex }),
	Uint(NetdevANAPIThreaded, func(v *NetdevNAPI) *uint64 { return &v.Threaded }),
	U32(NetdevANAPIDeferHardIRQs, func(v *NetdevNAPI) *uint32 { return &v.DeferHardIRQs }),
	Uint(NetdevANAPIIRQSuspendTimeout, func(v *NetdevNAPI) *uint64 { return &v.IRQSuspendTimeout }),
	Uint(NetdevANAPIGROFlushTimeout, func(v *NetdevNAPI) *uint64 { return &v.GROFlushTimeout }),
)

// NetdevNAPISet is what a napi-set request (netdev_nl_napi_set_config) changes on one NAPI:
// each non-nil field is a setting the request carries; the others stay as they are. The
// timeouts are nanoseconds on the wire (NLA_UINT).
type NetdevNAPISet struct {
	DeferHardIRQs                      *uint32
	GROFlushTimeout, IRQSuspendTimeout *time.Duration
	Threaded                           *bool
}

// NetdevNAPISetRequest is a napi-set request: the NAPI's id and the settings it changes.
type NetdevNAPISetRequest struct {
	ID uint32
	NetdevNAPISet
}

// NetdevNAPISetTable is a napi-set request as the client writes it and the server reads it
// (netdev_nl_napi_set_doit; policy netdev_napi_set_nl_policy): threaded as
// NETDEV_NAPI_THREADED_ENABLED or _DISABLED.
var NetdevNAPISetTable = NewTable(
	U32(NetdevANAPIID, func(r *NetdevNAPISetRequest) *uint32 { return &r.ID }),
	OptU32(NetdevANAPIDeferHardIRQs, func(r *NetdevNAPISetRequest) **uint32 { return &r.DeferHardIRQs }),
	OptNanos(NetdevANAPIGROFlushTimeout, func(r *NetdevNAPISetRequest) **time.Duration { return &r.GROFlushTimeout }),
	OptNanos(NetdevANAPIIRQSuspendTimeout, func(r *NetdevNAPISetRequest) **time.Duration { return &r.IRQSuspendTimeout }),
	Field[NetdevNAPISetRequest]{typ: NetdevANAPIThreaded, kind: KindU32,
		put: func(b *nlattr.Builder, r *NetdevNAPISetRequest) {
			v := uint32(NetdevNAPIThreadedDisabled)
			if *r.Threaded {
				v = NetdevNAPIThreadedEnabled
			}
			b.PutU32(NetdevANAPIThreaded, v)
		},
		get: func(a nlattr.Attr, r *NetdevNAPISetRequest) error {
			on := a.U32() != NetdevNAPIThreadedDisabled
			r.Threaded = &on
			return short(a, 4)
		},
		zero: func(r *NetdevNAPISetRequest) bool { return r.Threaded == nil },
	}.OmitZero(),
)

// NetdevPagePool is a page-pool-get reply (page_pool_nl_fill).
type NetdevPagePool struct {
	ID uint64
	// Ifindex is the pool's netdev; 0 (left out) once that netdev is gone, as
	// page_pool_nl_fill leaves out loopback's, where page_pool_unreg_netdev
	// moves the pools of an unregistered netdev.
	Ifindex     uint32
	NAPIID      uint64 // 0: none (detached), left out
	Inflight    uint64
	InflightMem uint64
	// DetachTime is the CLOCK_BOOTTIME second its queue went away; 0 while
	// attached, left out.
	DetachTime uint64
}

// NetdevPagePoolTable writes a NetdevPagePool in the kernel's order.
var NetdevPagePoolTable = NewTable(
	Uint(NetdevAPagePoolID, func(v *NetdevPagePool) *uint64 { return &v.ID }),
	U32(NetdevAPagePoolIfindex, func(v *NetdevPagePool) *uint32 { return &v.Ifindex }).OmitZero(),
	Uint(NetdevAPagePoolNAPIID, func(v *NetdevPagePool) *uint64 { return &v.NAPIID }).OmitZero(),
	Uint(NetdevAPagePoolInflight, func(v *NetdevPagePool) *uint64 { return &v.Inflight }),
	Uint(NetdevAPagePoolInflightMem, func(v *NetdevPagePool) *uint64 { return &v.InflightMem }),
	Uint(NetdevAPagePoolDetachTime, func(v *NetdevPagePool) *uint64 { return &v.DetachTime }).OmitZero(),
)

// NetdevPagePoolInfo is the page-pool-stats info nest: which pool.
type NetdevPagePoolInfo struct {
	ID      uint64
	Ifindex uint32
}

// NetdevPagePoolInfoTable writes the info nest.
var NetdevPagePoolInfoTable = NewTable(
	Uint(NetdevAPagePoolID, func(v *NetdevPagePoolInfo) *uint64 { return &v.ID }),
	U32(NetdevAPagePoolIfindex, func(v *NetdevPagePoolInfo) *uint32 { return &v.Ifindex }),
)

// NetdevPagePoolStats is a page-pool-stats-get reply
// (page_pool_nl_stats_fill): struct page_pool_stats by the kernel's names.
type NetdevPagePoolStats struct {
	Info                                                              NetdevPagePoolInfo
	AllocFast, AllocSlow, AllocSlowHighOrder, AllocEmpty, AllocRefill uint64
	AllocWaive, RecycleCached, RecycleCacheFull, RecycleRing          uint64
	RecycleRingFull, RecycleReleasedRefcnt                            uint64
}

// NetdevPagePoolStatsTable writes a NetdevPagePoolStats in the kernel's order.
var NetdevPagePoolStatsTable = NewTable(
	Nest(NetdevAPagePoolStatsInfo, func(v *NetdevPagePoolStats) *NetdevPagePoolInfo { return &v.Info }, NetdevPagePoolInfoTable),
	Uint(NetdevAPagePoolStatsAllocFast, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocFast }),
	Uint(NetdevAPagePoolStatsAllocSlow, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocSlow }),
	Uint(NetdevAPagePoolStatsAllocSlowHighOrder, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocSlowHighOrder }),
	Uint(NetdevAPagePoolStatsAllocEmpty, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocEmpty }),
	Uint(NetdevAPagePoolStatsAllocRefill, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocRefill }),
	Uint(NetdevAPagePoolStatsAllocWaive, func(v *NetdevPagePoolStats) *uint64 { return &v.AllocWaive }),
	Uint(NetdevAPagePoolStatsRecycleCached, func(v *NetdevPagePoolStats) *uint64 { return &v.RecycleCached }),
	Uint(NetdevAPagePoolStatsRecycleCacheFull, func(v *NetdevPagePoolStats) *uint64 { return &v.RecycleCacheFull }),
	Uint(NetdevAPagePoolStatsRecycleRing, func(v *NetdevPagePoolStats) *uint64 { return &v.RecycleRing }),
	Uint(NetdevAPagePoolStatsRecycleRingFull, func(v *NetdevPagePoolStats) *uint64 { return &v.RecycleRingFull }),
	Uint(NetdevAPagePoolStatsRecycleReleasedRefcnt, func(v *NetdevPagePoolStats) *uint64 { return &v.RecycleReleasedRefcnt }),
)

// NetdevQStats is a qstats-get reply: a device's (Scoped false: both RX and
// TX counters) or one queue's (Scoped true: Type and QueueID, and only that
// type's counters), as netdev_nl_stats_by_netdev and netdev_nl_stats_queue
// write them. HasRX/HasTX are not on the wire: they say which counters the
// message carries (the kernel leaves out what the driver does not fill).
type NetdevQStats struct {
	Ifindex       uint32
	Scoped        bool
	Type, QueueID uint32
	HasRX, HasTX  bool
	// Present has bit t set for each counter attribute t a decoded message carried (a device
	// reports only the counters it keeps); not on the wire, set by the client's decoder.
	Present                                                      uint64
	RxPackets, RxBytes, RxAllocFail, RxHwDrops, RxHwDropOverruns uint64
	TxPackets, TxBytes                                           uint64
}

func qsRX(v *NetdevQStats) bool    { return v.HasRX }
func qsTX(v *NetdevQStats) bool    { return v.HasTX }
func qsQueue(v *NetdevQStats) bool { return v.Scoped }

// NetdevQStatsTable writes a NetdevQStats in the kernel's order (RX
// counters, then TX). Decoding sets HasRX/HasTX only through the caller
// (see the client).
var NetdevQStatsTable = NewTable(
	U32(NetdevAQStatsIfindex, func(v *NetdevQStats) *uint32 { return &v.Ifindex }),
	U32(NetdevAQStatsQueueType, func(v *NetdevQStats) *uint32 { return &v.Type }).When(qsQueue),
	U32(NetdevAQStatsQueueID, func(v *NetdevQStats) *uint32 { return &v.QueueID }).When(qsQueue),
	Uint(NetdevAQStatsRxPackets, func(v *NetdevQStats) *uint64 { return &v.RxPackets }).When(qsRX),
	Uint(NetdevAQStatsRxBytes, func(v *NetdevQStats) *uint64 { return &v.RxBytes }).When(qsRX),
	Uint(NetdevAQStatsRxAllocFail, func(v *NetdevQStats) *uint64 { return &v.RxAllocFail }).When(qsRX),
	Uint(NetdevAQStatsRxHwDrops, func(v *NetdevQStats) *uint64 { return &v.RxHwDrops }).When(qsRX),
	Uint(NetdevAQStatsRxHwDropOverruns, func(v *NetdevQStats) *uint64 { return &v.RxHwDropOverruns }).When(qsRX),
	Uint(NetdevAQStatsTxPackets, func(v *NetdevQStats) *uint64 { return &v.TxPackets }).When(qsTX),
	Uint(NetdevAQStatsTxBytes, func(v *NetdevQStats) *uint64 { return &v.TxBytes }).When(qsTX),
)
