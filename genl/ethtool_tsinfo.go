package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// TSINFO messages, as net/ethtool/tsinfo.c.

// tsInfoGetPolicy is ethnl_tsinfo_get_policy: the header with
// ETHTOOL_FLAG_STATS and the hardware timestamp provider to ask about
// (ethnl_ts_hwtst_prov_policy).
var tsInfoGetPolicy = nlattr.NewSet(unix.ETHTOOL_A_TSINFO_HWTSTAMP_PROVIDER, map[uint16]nlattr.Policy{
	unix.ETHTOOL_A_TSINFO_HEADER:            {Kind: nlattr.Nested, Nested: statsHeader()},
	unix.ETHTOOL_A_TSINFO_HWTSTAMP_PROVIDER: nested(hwtstampProvPolicy),
})

// tsInfoReq is struct tsinfo_req_info as manad needs it.
type tsInfoReq struct {
	stats    bool // ETHTOOL_FLAG_STATS
	provider bool // a HWTSTAMP_PROVIDER was named
}

// tsInfoParse mirrors tsinfo_parse_request and ts_parse_hwtst_provider: a
// provider needs both its index and its qualifier.
func tsInfoParse(r *request) (any, error) {
	req := &tsInfoReq{stats: wantStats(r)}
	nest := r.attr(unix.ETHTOOL_A_TSINFO_HWTSTAMP_PROVIDER)
	if !nest.Present() {
		return req, nil
	}
	tb, err := nlattr.ParseNested(r.msg, nest, hwtstampProvPolicy)
	if err != nil {
		return nil, err
	}
	for _, t := range []uint16{1, 2} { // ETHTOOL_A_TS_HWTSTAMP_PROVIDER_INDEX, _QUALIFIER
		if !tb[t].Present() {
			return nil, nlattr.Missing(nest, t)
		}
	}
	req.provider = true
	return req, nil
}

// coreTimestamping is what __ethtool_get_ts_info adds to every driver's
// answer: software receive timestamps and the software clock.
const coreTimestamping = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE

// tsInfoGet mirrors tsinfo_prepare_data and tsinfo_fill_reply: each bitset
// as a list (no mask), written only when not empty; the PHC index only when
// there is one; with ETHTOOL_FLAG_STATS a STATS nest, empty for a driver
// without get_ts_stats (mana).
var tsInfoGet = &ethGet{
	replyCmd: unix.ETHTOOL_MSG_TSINFO_GET_REPLY,
	driver:   "TSInfo",
	parse:    tsInfoParse,
	prepare: func(r *request, d *Device, req any) (any, error) {
		// ethtool_get_ts_info_by_phc: no PHC of the device's has the index asked
		// for, as mana has none. A dump does not ask (ethnl_tsinfo_dumpit).
		if req.(*tsInfoReq).provider && r.hdr.Flags&nlattr.FlagDump != nlattr.FlagDump {
			return nil, unix.ENODEV
		}
		ts, err := TSInfo{PHCIndex: -1}, error(nil) // __ethtool_get_ts_info without get_ts_info
		if get := r.s.cfg.Backend.TSInfo; get != nil {
			ts, err = get(r.ctx, r.c.caller, *d)
		}
		ts.Timestamping |= coreTimestamping
		return &ts, err
	},
	fill: func(r *request, b *nlattr.Builder, req, data any, compact bool) error {
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
			names, nbits := r.s.globalBits(bs.set, bs.n)
			ethtool.PutBitset32(b, bs.attr, []uint32{bs.v}, nil, nbits, names, compact)
		}
		if ts.PHCIndex >= 0 {
			b.PutU32(unix.ETHTOOL_A_TSINFO_PHC_INDEX, uint32(ts.PHCIndex))
		}
		if req.(*tsInfoReq).stats {
			b.EndNest(b.Nest(unix.ETHTOOL_A_TSINFO_STATS))
		}
		return nil
	},
}

// TSInfoGet is TSINFO_GET (ethnl_tsinfo_request_ops).
func (ethtoolMsgs) TSInfoGet() op {
	return ethGetOp(unix.ETHTOOL_MSG_TSINFO_GET, "tsinfo-get", tsInfoGetPolicy, tsInfoGet)
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
