package ethioctl

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/wire"
)

// Each method below mirrors the net/ethtool/ioctl.c handler named in its comment, as it runs
// mana's ethtool_ops: the same copies in and out, in the same order, and the same checks; where
// the kernel calls the driver, it asks manad over ethtool netlink.

// eTooSmall is the kernel's ETOOSMALL (525), which ETHTOOL_GPERMADDR returns to user space
// although no libc names it.
const eTooSmall = unix.Errno(525)

// ethALen is the port's dev->addr_len.
const ethALen = 6

// getDrvinfo mirrors ethtool_get_drvinfo for a driver without get_drvinfo whose parent device
// is bound to the "mana" PCI driver: the driver's name, UTS_RELEASE as the version, and the
// counts get_sset_count gives (n_stats: ETH_SS_STATS as manad's STRSET_GET reports it, mana's
// 83 + 20 per queue followed by manad's own "manad_" counters, so that GDRVINFO, GSSET_INFO,
// GSTRINGS, GSTATS and netlink agree). mana has no self test, registers or EEPROM.
//
// The firmware version stays empty as on a real mana netdev: mana has neither get_drvinfo nor
// a devlink instance to fill it. The bus address, which the kernel takes from the parent
// device (the PCI function, e.g. "7870:00:00.0" on Azure), stays empty too: a port's TAP has no
// parent device (no /sys/class/net/PORT/device, no IFLA_PARENT_DEV_NAME in rtnetlink), and a
// made-up PCI address would send the tools that resolve bus-info (lspci -s, devlink, udev
// rules matching ID_PATH) to a device that does not exist or is another one.
func (c *call) getDrvinfo() error {
	counts, err := c.setCounts([]uint32{ethtool.SSStats, ethtool.SSPrivFlags})
	if err != nil {
		return err
	}
	d := drvinfo{Cmd: unix.ETHTOOL_GDRVINFO}
	cString(d.Driver[:], "mana")
	cString(d.Version[:], c.h.release())
	d.NStats = uint32(counts[ethtool.SSStats])
	d.NPrivFlags = uint32(counts[ethtool.SSPrivFlags])
	return c.writeStruct(0, &d)
}

// release is the driver version GDRVINFO reports (UTS_RELEASE).
func (h *Handler) release() string {
	if h.opts.Release != "" {
		return h.opts.Release
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return goString(u.Release[:])
}

// getSSetInfo mirrors ethtool_get_sset_info: an empty mask is answered with nothing written;
// otherwise the mask keeps the sets that have a count and the counts follow the header.
func (c *call) getSSetInfo() error {
	var in ssetInfo
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	if in.SsetMask == 0 {
		return nil
	}
	var ids []uint32
	for i := range uint32(64) {
		if in.SsetMask&(1<<i) != 0 {
			ids = append(ids, i)
		}
	}
	counts, err := c.setCounts(ids)
	if err != nil {
		return err
	}
	out := ssetInfo{Cmd: unix.ETHTOOL_GSSET_INFO}
	var data []byte
	for _, id := range ids {
		if n, ok := counts[id]; ok {
			out.SsetMask |= 1 << id
			data = binary.NativeEndian.AppendUint32(data, uint32(n))
		}
	}
	if err := c.writeStruct(0, &out); err != nil {
		return err
	}
	return c.write(ssetInfoDataOff, data)
}

// getStrings mirrors ethtool_get_strings: the caller's len is not read, the set's count is
// written back and that many ETH_GSTRING_LEN strings follow (the caller sized its buffer with
// GSSET_INFO or GDRVINFO first). A set mana does not have is EINVAL (mana_get_sset_count).
func (c *call) getStrings() error {
	var in gstrings
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	perDev, ok := ioctlSets[in.StringSet]
	if !ok {
		return unix.EINVAL
	}
	sets, err := c.stringSets(in.StringSet)
	if err != nil {
		return err
	}
	strs := sets[in.StringSet]
	if perDev && len(strs) == 0 {
		return unix.EINVAL
	}
	out := gstrings{Cmd: unix.ETHTOOL_GSTRINGS, StringSet: in.StringSet, Len: uint32(len(strs))}
	buf := make([]byte, len(strs)*ethtool.GStringLen)
	for i, s := range strs {
		cString(buf[i*ethtool.GStringLen:(i+1)*ethtool.GStringLen], s)
	}
	if err := c.writeStruct(0, &out); err != nil {
		return err
	}
	return c.write(uint64(binary.Size(out)), buf)
}

// getStats mirrors ethtool_get_stats: n_stats and the values, in ETH_SS_STATS order, from
// manad's STATS_GET (the driver's counters, as ethtool -S shows them).
func (c *call) getStats() error {
	st, err := c.c.Stats(c.ctx, c.ifi)
	if err != nil {
		return c.manadErr("STATS_GET", err)
	}
	if len(st) > maxStrings {
		return unix.ENOMEM
	}
	var in statsHead
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	out := statsHead{Cmd: unix.ETHTOOL_GSTATS, NStats: uint32(len(st))}
	buf := make([]byte, 8*len(st))
	for i, s := range st {
		binary.NativeEndian.PutUint64(buf[8*i:], s.Value)
	}
	if err := c.writeStruct(0, &out); err != nil {
		return err
	}
	return c.write(uint64(binary.Size(out)), buf)
}

// getPrivFlags mirrors ethtool_get_value with get_priv_flags. (The kernel also sends a
// PRIVFLAGS_NTF on every GPFLAGS, a quirk of dev_ethtool the bridge cannot reproduce: it
// would need a SET.)
func (c *call) getPrivFlags() error {
	pf, err := c.c.PrivateFlags(c.ctx, c.ifi)
	if err != nil {
		return c.manadErr("PRIVFLAGS_GET", err)
	}
	return c.writeStruct(0, &value{Cmd: unix.ETHTOOL_GPFLAGS, Data: pf.Bits()})
}

// setPrivFlags mirrors ethtool_set_value with mana_set_priv_flags: bits past the driver's flags
// are EINVAL; the rest go to manad as PRIVFLAGS_SET naming every flag.
func (c *call) setPrivFlags() error {
	var in value
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	pf, err := c.c.PrivateFlags(c.ctx, c.ifi)
	if err != nil {
		return c.manadErr("PRIVFLAGS_GET", err)
	}
	if n := len(pf.Flags); n < 32 && in.Data>>n != 0 {
		return unix.EINVAL
	}
	set := client.PrivateFlags{Interface: c.ifi}
	for _, f := range pf.Flags {
		if f.Index < 0 || f.Index >= 32 {
			continue
		}
		set.Flags = append(set.Flags, client.Flag{Name: f.Name, Index: f.Index, On: in.Data&(1<<f.Index) != 0})
	}
	if err := c.c.SetPrivateFlags(c.ctx, set); err != nil {
		return c.manadErr("PRIVFLAGS_SET", err)
	}
	return nil
}

func (c *call) rings() (*client.Rings, error) {
	r, err := c.c.Rings(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("RINGS_GET", err)
	}
	return r, nil
}

// getRingparam mirrors ethtool_get_ringparam.
func (c *call) getRingparam() error {
	r, err := c.rings()
	if err != nil {
		return err
	}
	return c.writeStruct(0, &ringparam{
		Cmd:          unix.ETHTOOL_GRINGPARAM,
		RxMaxPending: r.RxMax, RxMiniMaxPending: r.RxMiniMax, RxJumboMaxPending: r.RxJumboMax, TxMaxPending: r.TxMax,
		RxPending: r.Rx, RxMiniPending: r.RxMini, RxJumboPending: r.RxJumbo, TxPending: r.Tx,
	})
}

// setRingparam mirrors ethtool_set_ringparam: a size above its maximum is EINVAL; the sizes go
// to manad's RINGS_SET (mana's minimum and power-of-two rounding are manad's).
func (c *call) setRingparam() error {
	var in ringparam
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	r, err := c.rings()
	if err != nil {
		return err
	}
	if in.RxPending > r.RxMax || in.RxMiniPending > r.RxMiniMax ||
		in.RxJumboPending > r.RxJumboMax || in.TxPending > r.TxMax {
		return unix.EINVAL
	}
	u := client.RingsUpdate{Rx: &in.RxPending, Tx: &in.TxPending}
	if r.RxMiniMax != 0 {
		u.RxMini = &in.RxMiniPending
	}
	if r.RxJumboMax != 0 {
		u.RxJumbo = &in.RxJumboPending
	}
	if err := c.c.SetRings(c.ctx, c.ifi, u); err != nil {
		return c.manadErr("RINGS_SET", err)
	}
	return nil
}

func (c *call) channels() (*client.Channels, error) {
	ch, err := c.c.Channels(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("CHANNELS_GET", err)
	}
	return ch, nil
}

// getChannels mirrors ethtool_get_channels.
func (c *call) getChannels() error {
	ch, err := c.channels()
	if err != nil {
		return err
	}
	return c.writeStruct(0, &channelsC{
		Cmd:   unix.ETHTOOL_GCHANNELS,
		MaxRx: ch.RxMax, MaxTx: ch.TxMax, MaxOther: ch.OtherMax, MaxCombined: ch.CombinedMax,
		Rx: ch.Rx, Tx: ch.Tx, Other: ch.Other, Combined: ch.Combined,
	})
}

// setChannels mirrors ethtool_set_channels: no change is success without a request; a count
// above its maximum, or no RX or no TX channel, is EINVAL; the counts go to manad's
// CHANNELS_SET, which applies ethtool_check_max_channel (the RSS table's highest queue) itself.
func (c *call) setChannels() error {
	var in channelsC
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	cur, err := c.channels()
	if err != nil {
		return err
	}
	if in.Rx == cur.Rx && in.Tx == cur.Tx && in.Combined == cur.Combined && in.Other == cur.Other {
		return nil
	}
	if in.Rx > cur.RxMax || in.Tx > cur.TxMax || in.Combined > cur.CombinedMax || in.Other > cur.OtherMax {
		return unix.EINVAL
	}
	if in.Combined == 0 && (in.Rx == 0 || in.Tx == 0) {
		return unix.EINVAL
	}
	// Counts whose maximum is 0 passed the bounds only as 0, which they already are: only
	// the others are sent.
	u := client.ChannelsUpdate{}
	for _, f := range []struct {
		max uint32
		v   *uint32
		dst **uint32
	}{{cur.RxMax, &in.Rx, &u.Rx}, {cur.TxMax, &in.Tx, &u.Tx}, {cur.OtherMax, &in.Other, &u.Other}, {cur.CombinedMax, &in.Combined, &u.Combined}} {
		if f.max != 0 {
			*f.dst = f.v
		}
	}
	if err := c.c.SetChannels(c.ctx, c.ifi, u); err != nil {
		return c.manadErr("CHANNELS_SET", err)
	}
	return nil
}

func (c *call) coalesce() (*client.Coalesce, error) {
	co, err := c.c.Coalesce(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("COALESCE_GET", err)
	}
	return co, nil
}

// getCoalesce mirrors ethtool_get_coalesce: every field of struct ethtool_coalesce is the
// COALESCE_GET attribute of the same rank; one the reply leaves out is 0.
func (c *call) getCoalesce() error {
	co, err := c.coalesce()
	if err != nil {
		return err
	}
	out := coalesceC{Cmd: unix.ETHTOOL_GCOALESCE}
	for i := range out.F {
		out.F[i] = co.Attrs[uint16(i+coalesceFirstAttr)]
	}
	return c.writeStruct(0, &out)
}

// setCoalesce mirrors ethtool_set_coalesce: get_coalesce first, then the copy in, then
// ethtool_set_coalesce_supported (a nonzero field the driver does not support is EOPNOTSUPP; a
// parameter is supported when COALESCE_GET reports it, as coalesce_fill_reply reports every
// supported one), then every supported field goes to manad's COALESCE_SET.
func (c *call) setCoalesce() error {
	co, err := c.coalesce()
	if err != nil {
		return err
	}
	var in coalesceC
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	u := client.CoalesceUpdate{U32: map[uint16]uint32{}, Bool: map[uint16]bool{}}
	for i, v := range in.F {
		t := uint16(i + coalesceFirstAttr)
		if _, ok := co.Attrs[t]; !ok {
			if v != 0 {
				return unix.EOPNOTSUPP
			}
			continue
		}
		if t == unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_RX || t == unix.ETHTOOL_A_COALESCE_USE_ADAPTIVE_TX {
			u.Bool[t] = v != 0
		} else {
			u.U32[t] = v
		}
	}
	if err := c.c.SetCoalesce(c.ctx, c.ifi, u); err != nil {
		return c.manadErr("COALESCE_SET", err)
	}
	return nil
}

// linkModes returns the link mode names (ETH_SS_LINK_MODES) by bit.
func (c *call) linkModes() ([]string, error) {
	sets, err := c.stringSets(ethtool.SSLinkModes)
	if err != nil {
		return nil, err
	}
	modes := sets[ethtool.SSLinkModes]
	if len(modes) == 0 || len(modes) > maxLinkMode {
		return nil, unix.EINVAL
	}
	return modes, nil
}

func (c *call) linkSettings() (*client.LinkSettings, error) {
	ls, err := c.c.LinkSettings(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("LINKINFO_GET/LINKMODES_GET", err)
	}
	return ls, nil
}

// modeMask returns the bitmap, in nwords u32 words, of the link modes named.
func modeMask(modes, names []string, nwords int) []uint32 {
	idx := make(map[string]int, len(modes))
	for i, m := range modes {
		idx[m] = i
	}
	w := make([]uint32, nwords)
	for _, n := range names {
		if i, ok := idx[n]; ok && i/32 < nwords {
			w[i/32] |= 1 << (i % 32)
		}
	}
	return w
}

// getLinkSettings mirrors ethtool_get_link_ksettings with its link_mode_masks_nwords
// handshake: a caller whose nwords is not the kernel's gets the base back, zeroed, with
// -nwords, and success; else the base and the supported, advertising and lp_advertising masks.
func (c *call) getLinkSettings() error {
	var in linkSettings
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	modes, err := c.linkModes()
	if err != nil {
		return err
	}
	nwords := (len(modes) + 31) / 32
	if int(in.LinkModeMasksNwords) != nwords {
		return c.writeStruct(0, &linkSettings{Cmd: unix.ETHTOOL_GLINKSETTINGS, LinkModeMasksNwords: int8(-nwords)})
	}
	ls, err := c.linkSettings()
	if err != nil {
		return err
	}
	out := linkSettings{
		Cmd: unix.ETHTOOL_GLINKSETTINGS, Speed: ls.Speed, Duplex: ls.Duplex, Port: ls.Port,
		PhyAddress: ls.PhyAddr, Autoneg: ls.Autoneg, EthTpMdix: ls.MDIX, EthTpMdixCtrl: ls.MDIXCtrl,
		LinkModeMasksNwords: int8(nwords), Transceiver: ls.Transceiver,
		// MASTER_SLAVE_CFG_UNSUPPORTED, MASTER_SLAVE_STATE_UNSUPPORTED, RATE_MATCH_NONE: 0
	}
	var masks []uint32
	for _, names := range [][]string{ls.Supported, ls.Advertised, ls.Peer} {
		masks = append(masks, modeMask(modes, names, nwords)...)
	}
	if err := c.writeStruct(0, &out); err != nil {
		return err
	}
	return c.writeStruct(linkModeMasksOff, masks)
}

// getSettings mirrors ethtool_get_settings: get_link_ksettings converted by
// convert_link_ksettings_to_legacy_settings (the first 32 link modes of each mask, the speed
// split in speed and speed_hi).
func (c *call) getSettings() error {
	modes, err := c.linkModes()
	if err != nil {
		return err
	}
	ls, err := c.linkSettings()
	if err != nil {
		return err
	}
	return c.writeStruct(0, &legacyCmd{
		Cmd:           unix.ETHTOOL_GSET,
		Supported:     modeMask(modes, ls.Supported, 1)[0],
		Advertising:   modeMask(modes, ls.Advertised, 1)[0],
		LpAdvertising: modeMask(modes, ls.Peer, 1)[0],
		Speed:         uint16(ls.Speed), SpeedHi: uint16(ls.Speed >> 16),
		Duplex: ls.Duplex, Port: ls.Port, PhyAddress: ls.PhyAddr, Transceiver: ls.Transceiver,
		Autoneg: ls.Autoneg, EthTpMdix: ls.MDIX, EthTpMdixCtrl: ls.MDIXCtrl,
	})
}

// getLink mirrors ethtool_get_link with ethtool_op_get_link: netif_running && carrier, which
// is what LINKSTATE_GET's LINK reports.
func (c *call) getLink() error {
	ls, err := c.c.LinkState(c.ctx, c.ifi)
	if err != nil {
		return c.manadErr("LINKSTATE_GET", err)
	}
	v := value{Cmd: unix.ETHTOOL_GLINK}
	if ls.Link {
		v.Data = 1
	}
	return c.writeStruct(0, &v)
}

// flowRSS is FLOW_RSS, the ethtool_rxnfc flow_type flag that names an RSS context.
const flowRSS = 0x20000000

// readRxnfc mirrors ethtool_rxnfc_copy_struct: the GRXFH/SRXFH form is 16 bytes unless
// flow_type has FLOW_RSS; cmd must be the command's.
func (c *call) readRxnfc() ([]byte, error) {
	size := rxnfcSize
	if c.cmd == unix.ETHTOOL_GRXFH || c.cmd == unix.ETHTOOL_SRXFH {
		size = rxnfcLegacySize
	}
	b := make([]byte, rxnfcSize)
	if err := c.read(0, b[:size]); err != nil {
		return nil, err
	}
	var h rxnfcHead
	decode(b, &h)
	if size == rxnfcLegacySize && h.FlowType&flowRSS != 0 {
		if err := c.read(0, b); err != nil {
			return nil, err
		}
		decode(b, &h)
		if h.FlowType&flowRSS == 0 {
			return nil, unix.EINVAL
		}
	}
	if h.Cmd != c.cmd {
		return nil, unix.EINVAL
	}
	return b, nil
}

// getRxRings mirrors ethtool_get_rxnfc with mana_get_rxnfc's ETHTOOL_GRXRINGS: data is the
// number of queues (the combined channels); the whole struct ethtool_rxnfc goes back.
func (c *call) getRxRings() error {
	b, err := c.readRxnfc()
	if err != nil {
		return err
	}
	ch, err := c.channels()
	if err != nil {
		return err
	}
	binary.NativeEndian.PutUint64(b[8:], uint64(ch.Combined))
	return c.write(0, b)
}

// maxRuleCnt is what kcalloc(rule_cnt, 4) allows on x86-64 (KMALLOC_MAX_SIZE, 4 MiB): a larger
// GRXCLSRLALL rule_cnt is ENOMEM before the driver is asked.
const maxRuleCnt = 4 << 20 / 4

// getRxClassRules mirrors ethtool_get_rxnfc for the classification-rule queries, which
// mana_get_rxnfc does not answer: EOPNOTSUPP after the copy in and its checks.
func (c *call) getRxClassRules() error {
	b, err := c.readRxnfc()
	if err != nil {
		return err
	}
	if c.cmd == unix.ETHTOOL_GRXCLSRLALL {
		if n := binary.NativeEndian.Uint32(b[rxnfcRSSContextOff:]); n > maxRuleCnt {
			return unix.ENOMEM
		}
	}
	return unix.EOPNOTSUPP
}

// getRxFH mirrors ethtool_get_rxfh_fields with mana_get_rxnfc, which does not answer
// ETHTOOL_GRXFH: EOPNOTSUPP after the copy in and its checks (an RSS context other than 0 is
// EINVAL: mana has no per-context fields).
func (c *call) getRxFH() error {
	b, err := c.readRxnfc()
	if err != nil {
		return err
	}
	var h rxnfcHead
	decode(b, &h)
	if h.FlowType&flowRSS != 0 && binary.NativeEndian.Uint32(b[rxnfcRSSContextOff:]) != 0 {
		return unix.EINVAL
	}
	return unix.EOPNOTSUPP
}

// rss returns the port's RSS configuration (context 0), its sizes bounded.
func (c *call) rss() (*client.RSS, error) {
	r, err := c.c.RSS(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("RSS_GET", err)
	}
	if len(r.Indir) > maxIndir || len(r.HKey) > maxKey {
		return nil, unix.ENOMEM
	}
	return r, nil
}

// RSS constants of the uAPI.
const (
	rssHashNoChange  = 0          // ETH_RSS_HASH_NO_CHANGE
	rxhXfrmSymXor    = 1 << 0     // RXH_XFRM_SYM_XOR
	rxhXfrmSymOrXor  = 1 << 1     // RXH_XFRM_SYM_OR_XOR
	rxhXfrmNoChange  = 0xff       // RXH_XFRM_NO_CHANGE
	indirNoChange    = 0xffffffff // ETH_RXFH_INDIR_NO_CHANGE
	manaInputXfrms   = 0          // mana's supported_input_xfrm
	indirEntryLength = 4
)

// getRSSH mirrors ethtool_get_rxfh: the device's sizes go back first; a nonzero size the
// caller gave that is not the device's is then EINVAL; else hfunc, input_xfrm, key_size and as
// much of the table and key as the caller asked for.
func (c *call) getRSSH() error {
	r, err := c.rss()
	if err != nil {
		return err
	}
	var in rxfh
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	if in.Rsvd8 != [2]uint8{} || in.Rsvd32 != 0 {
		return unix.EINVAL
	}
	if in.RSSContext != 0 {
		return unix.EOPNOTSUPP // mana has no RSS contexts
	}
	devIndir, devKey := uint32(len(r.Indir)), uint32(len(r.HKey))
	userIndir, userKey := in.IndirSize, in.KeySize
	out := in
	out.IndirSize, out.KeySize = devIndir, devKey
	if err := c.writeStruct(0, &out); err != nil {
		return err
	}
	if (userIndir != 0 && userIndir != devIndir) || (userKey != 0 && userKey != devKey) {
		return unix.EINVAL
	}
	if err := c.write(16, []byte{uint8(r.HFunc), uint8(r.InputXfrm)}); err != nil {
		return err
	}
	if err := c.write(12, binary.NativeEndian.AppendUint32(nil, devKey)); err != nil {
		return err
	}
	var cfg []byte
	if userIndir != 0 {
		cfg = wire.IndirBytes(r.Indir)
	}
	if userKey != 0 {
		cfg = append(cfg, r.HKey...)
	}
	return c.write(rxfhConfigOff, cfg)
}

// readIndir reads n indirection table entries at off and checks each names one of rings
// queues (ethtool_copy_validate_indir).
func (c *call) readIndir(off uint64, n, rings uint32) ([]uint32, error) {
	b := make([]byte, int(n)*indirEntryLength)
	if err := c.read(off, b); err != nil {
		return nil, err
	}
	t := make([]uint32, n)
	for i := range t {
		t[i] = binary.NativeEndian.Uint32(b[4*i:])
		if t[i] >= rings {
			return nil, unix.EINVAL
		}
	}
	return t, nil
}

// setRSSH mirrors ethtool_set_rxfh for context 0 and sends the change as manad's RSS_SET: a
// table (indir_size the device's), the default table (indir_size 0: an empty RSS_INDIR, which
// puts the default back as the kernel's netlink does), the key, the hash function; mana's own
// refusals (port down, a function other than Toeplitz) are manad's.
func (c *call) setRSSH() error {
	var in rxfh
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	if in.Rsvd8 != [2]uint8{} || in.Rsvd32 != 0 {
		return unix.EINVAL
	}
	if in.RSSContext != 0 {
		return unix.EOPNOTSUPP
	}
	if in.InputXfrm != 0 && in.InputXfrm != rxhXfrmSymXor && in.InputXfrm != rxhXfrmSymOrXor && in.InputXfrm != rxhXfrmNoChange {
		return unix.EINVAL
	}
	if in.InputXfrm != rxhXfrmNoChange && in.InputXfrm&^manaInputXfrms != 0 {
		return unix.EOPNOTSUPP
	}
	r, err := c.rss()
	if err != nil {
		return err
	}
	devIndir, devKey := uint32(len(r.Indir)), uint32(len(r.HKey))
	if (in.IndirSize != 0 && in.IndirSize != indirNoChange && in.IndirSize != devIndir) ||
		(in.KeySize != 0 && in.KeySize != devKey) {
		return unix.EINVAL
	}
	if in.IndirSize == indirNoChange && in.KeySize == 0 && in.HFunc == rssHashNoChange && in.InputXfrm == rxhXfrmNoChange {
		return unix.EINVAL
	}
	ch, err := c.channels()
	if err != nil {
		return err
	}
	var set wire.RSSSet
	var indirLen uint64
	switch in.IndirSize {
	case indirNoChange:
	case 0:
		set.Indir = []uint32{}
	default:
		if set.Indir, err = c.readIndir(rxfhConfigOff, devIndir, ch.Combined); err != nil {
			return err
		}
		indirLen = uint64(devIndir) * indirEntryLength
	}
	if in.KeySize != 0 {
		set.HKey = make([]byte, devKey)
		if err := c.read(rxfhConfigOff+indirLen, set.HKey); err != nil {
			return err
		}
	}
	set.HFunc = uint32(in.HFunc)
	if err := c.c.SetRSS(c.ctx, c.ifi, set); err != nil {
		return c.manadErr("RSS_SET", err)
	}
	return c.write(rxfhRSSContextOff, make([]byte, 4))
}

// getRxFHIndir mirrors ethtool_get_rxfh_indir: the device's table size goes back; a caller's
// size of 0 is only that query, a smaller one EINVAL.
func (c *call) getRxFHIndir() error {
	r, err := c.rss()
	if err != nil {
		return err
	}
	size := uint32(len(r.Indir))
	if size == 0 {
		return unix.EOPNOTSUPP
	}
	var b [4]byte
	if err := c.read(rxfhIndirSizeOff, b[:]); err != nil {
		return err
	}
	user := binary.NativeEndian.Uint32(b[:])
	if err := c.write(rxfhIndirSizeOff, binary.NativeEndian.AppendUint32(nil, size)); err != nil {
		return err
	}
	if user < size {
		if user == 0 {
			return nil
		}
		return unix.EINVAL
	}
	return c.write(rxfhIndirRingOff, wire.IndirBytes(r.Indir))
}

// setRxFHIndir mirrors ethtool_set_rxfh_indir: size 0 puts the default table back, the
// device's size sets the table that follows.
func (c *call) setRxFHIndir() error {
	r, err := c.rss()
	if err != nil {
		return err
	}
	size := uint32(len(r.Indir))
	if size == 0 {
		return unix.EOPNOTSUPP
	}
	var b [4]byte
	if err := c.read(rxfhIndirSizeOff, b[:]); err != nil {
		return err
	}
	user := binary.NativeEndian.Uint32(b[:])
	if user != 0 && user != size {
		return unix.EINVAL
	}
	ch, err := c.channels()
	if err != nil {
		return err
	}
	set := wire.RSSSet{Indir: []uint32{}}
	if user != 0 {
		if set.Indir, err = c.readIndir(rxfhIndirRingOff, size, ch.Combined); err != nil {
			return err
		}
	}
	if err := c.c.SetRSS(c.ctx, c.ifi, set); err != nil {
		return c.manadErr("RSS_SET", err)
	}
	return nil
}

// getPermAddr mirrors ethtool_get_perm_addr: the port's MAC address, which is the NIC's (mana
// takes dev_addr from the vport and register_netdev copies it to perm_addr).
func (c *call) getPermAddr() error {
	var in permAddr
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	if in.Size < ethALen {
		return eTooSmall
	}
	if err := c.writeStruct(0, &permAddr{Cmd: unix.ETHTOOL_GPERMADDR, Size: ethALen}); err != nil {
		return err
	}
	mac := make([]byte, ethALen)
	copy(mac, c.port.MAC)
	return c.write(uint64(binary.Size(in)), mac)
}

// getTSInfo mirrors ethtool_get_ts_info: TSINFO_GET's bits by name, placed by the kernel's
// string sets for them (manad answers as __ethtool_get_ts_info does for mana, which has no
// get_ts_info: software time stamping, no PHC).
func (c *call) getTSInfo() error {
	ts, err := c.c.TSInfo(c.ctx, c.ifi)
	if err != nil {
		return c.manadErr("TSINFO_GET", err)
	}
	sets, err := c.stringSets(ethtool.SSSofTimestamping, ethtool.SSTsTxTypes, ethtool.SSTsRxFilters)
	if err != nil {
		return err
	}
	bits := func(id uint32, names []string) uint32 {
		return modeMask(sets[id], names, 1)[0]
	}
	return c.writeStruct(0, &tsInfo{
		Cmd:            unix.ETHTOOL_GET_TS_INFO,
		SoTimestamping: bits(ethtool.SSSofTimestamping, ts.Timestamping),
		PhcIndex:       ts.PHCIndex,
		TxTypes:        bits(ethtool.SSTsTxTypes, ts.TxTypes),
		RxFilters:      bits(ethtool.SSTsRxFilters, ts.RxFilters),
	})
}
