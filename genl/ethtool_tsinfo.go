package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TSINFO messages, as net/ethtool/tsinfo.c.

// tsInfoGetPolicy is the header of ethnl_tsinfo_get_policy (with
// ETHTOOL_FLAG_STATS). The HWTSTAMP_PROVIDER nest (a PHC choice; manad's
// ports have none) has no entry, so strict validation refuses it.
var tsInfoGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_TSINFO_HWTSTAMP_PROVIDER, map[uint16]nlattr.Policy{
	unix.ETHTOOL_A_TSINFO_HEADER: {Kind: nlattr.Nested, Nested: statsHeader()},
})

// coreTimestamping is what __ethtool_get_ts_info adds to every driver's
// answer: software receive timestamps and the software clock.
const coreTimestamping = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE

// tsInfoGet mirrors tsinfo_prepare_data and tsinfo_fill_reply: each bitset
// as a list (no mask), written only when not empty; the PHC index only when
// there is one; with ETHTOOL_FLAG_STATS a STATS nest, empty for a driver
// without get_ts_stats (mana).
func (s *Server) tsInfoGet() *ethGet {
	return &ethGet{
		replyCmd: unix.ETHTOOL_MSG_TSINFO_GET_REPLY,
		parse:    func(r *request) (any, error) { return wantStats(r), nil },
		prepare: func(r *request, d *Device, _ any) (any, error) {
			ts, err := s.cfg.Backend.TSInfo(r.ctx, r.c.caller, *d)
			ts.Timestamping |= coreTimestamping
			return &ts, err
		},
		fill: func(b *nlattr.Builder, req, data any, compact bool) error {
			ts := data.(*wire.TSInfo)
			for _, bs := range []struct {
				attr uint16
				set  uint32
				v    uint32
				n    int
			}{
				{unix.ETHTOOL_A_TSINFO_TIMESTAMPING, ethtool.SSSofTimestamping, ts.Timestamping, wire.SOFTimestampingBits},
				{unix.ETHTOOL_A_TSINFO_TX_TYPES, ethtool.SSTsTxTypes, ts.TxTypes, wire.TsTxTypeBits},
				{unix.ETHTOOL_A_TSINFO_RX_FILTERS, ethtool.SSTsRxFilters, ts.RxFilters, wire.TsRxFilterBits},
			} {
				if bs.v == 0 {
					continue
				}
				names, nbits := s.globalBits(bs.set, bs.n)
				ethtool.PutBitset32(b, bs.attr, []uint32{bs.v}, nil, nbits, names, compact)
			}
			if ts.PHCIndex >= 0 {
				b.PutU32(unix.ETHTOOL_A_TSINFO_PHC_INDEX, uint32(ts.PHCIndex))
			}
			if req.(bool) {
				b.EndNest(b.Nest(unix.ETHTOOL_A_TSINFO_STATS))
			}
			return nil
		},
	}
}

// globalBits returns the names of a kernel-wide bit table (string set id)
// and its size, which is the bitset size the kernel uses for it; without the
// kernel's tables, no names and the size fallback.
func (s *Server) globalBits(id uint32, fallback int) ([]string, int) {
	names, ok := s.globalSet(id)
	if !ok || len(names) == 0 {
		return nil, fallback
	}
	return names, len(names)
}
