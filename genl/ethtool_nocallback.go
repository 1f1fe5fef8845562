package genl

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
)

// The ethtool messages of the kernel's op list (6.18) that a mana netdev has
// no driver callback for: mana_ethtool_ops has no get_msglevel, get_wol,
// get_pauseparam, get_eee, get_fecparam, get_module_info, get_mm,
// create_rxfh_context or ndo_hwtstamp_get, and the device has no PHY, PSE,
// PLCA or UDP tunnel table. They are advertised with the kernel's flags and
// policies, so that tools which read the op list (ethtool checks it before
// taking the netlink path) see the kernel's family, and each answers as
// net/ethtool/*.c answers for mana: the request is validated against the
// op's policy, the header and the device are resolved (ENODEV, EINVAL as
// ethnl_parse_header_dev_get), the op's own request checks run, and then the
// missing callback is EOPNOTSUPP; a dump skips the device (an empty dump).
// The EPERM of a SET or ACT from a caller without CAP_NET_ADMIN comes first,
// from genlRcv, as genl_family_rcv_msg checks GENL_UNS_ADMIN_PERM before
// parsing.

// Attribute numbers of include/uapi/linux/ethtool_netlink_generated.h that
// golang.org/x/sys/unix v0.50.0 lacks, named as the kernel names them.
const (
	fecAAuto = 3 // ETHTOOL_A_FEC_AUTO

	moduleEEPROMAOffset     = 2 // ETHTOOL_A_MODULE_EEPROM_OFFSET
	moduleEEPROMALength     = 3 // ETHTOOL_A_MODULE_EEPROM_LENGTH
	moduleEEPROMAPage       = 4 // ETHTOOL_A_MODULE_EEPROM_PAGE
	moduleEEPROMABank       = 5 // ETHTOOL_A_MODULE_EEPROM_BANK
	moduleEEPROMAI2CAddress = 6 // ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS
	moduleEEPROMPageLen     = 128
	moduleMaxI2CAddress     = 0x7f

	moduleAPowerModePolicy = 2 // ETHTOOL_A_MODULE_POWER_MODE_POLICY

	psePodlAdminControl  = 3  // ETHTOOL_A_PODL_PSE_ADMIN_CONTROL
	pseC33AdminControl   = 6  // ETHTOOL_A_C33_PSE_ADMIN_CONTROL
	pseC33AvailPwLimit   = 12 // ETHTOOL_A_C33_PSE_AVAIL_PW_LIMIT
	psePrio              = 16 // ETHTOOL_A_PSE_PRIO
	pseAdminStateEnabled = 3  // ETHTOOL_PODL_PSE_ADMIN_STATE_ENABLED (= C33's)

	plcaAEnabled   = 3 // ETHTOOL_A_PLCA_ENABLED
	plcaANodeCnt   = 5 // ETHTOOL_A_PLCA_NODE_CNT
	plcaANodeID    = 6 // ETHTOOL_A_PLCA_NODE_ID
	plcaAToTmr     = 7 // ETHTOOL_A_PLCA_TO_TMR
	plcaABurstCnt  = 8 // ETHTOOL_A_PLCA_BURST_CNT
	plcaABurstTmr  = 9 // ETHTOOL_A_PLCA_BURST_TMR
	mmAPmacEnabled = 2 // ETHTOOL_A_MM_PMAC_ENABLED
	mmATxEnabled   = 3 // ETHTOOL_A_MM_TX_ENABLED
	mmATxMinFrag   = 5 // ETHTOOL_A_MM_TX_MIN_FRAG_SIZE
	mmAVerifyOn    = 7 // ETHTOOL_A_MM_VERIFY_ENABLED
	mmAVerifyTime  = 9 // ETHTOOL_A_MM_VERIFY_TIME

	fwFlashAFileName = 2 // ETHTOOL_A_MODULE_FW_FLASH_FILE_NAME
	fwFlashAPassword = 3 // ETHTOOL_A_MODULE_FW_FLASH_PASSWORD

	tsconfigAHwtstampProvider = 2 // ETHTOOL_A_TSCONFIG_HWTSTAMP_PROVIDER
	tsconfigATxTypes          = 3 // ETHTOOL_A_TSCONFIG_TX_TYPES
	tsconfigARxFilters        = 4 // ETHTOOL_A_TSCONFIG_RX_FILTERS
	tsconfigAHwtstampFlags    = 5 // ETHTOOL_A_TSCONFIG_HWTSTAMP_FLAGS

	rssAContext   = 2 // ETHTOOL_A_RSS_CONTEXT
	rssAHFunc     = 3 // ETHTOOL_A_RSS_HFUNC
	rssAIndir     = 4 // ETHTOOL_A_RSS_INDIR
	rssAHKey      = 5 // ETHTOOL_A_RSS_HKEY
	rssAInputXfrm = 6 // ETHTOOL_A_RSS_INPUT_XFRM

	// Message numbers newer than x/sys/unix v0.50.0 (enum ethtool_msg_type).
	msgRSSCreateAct = 0x31 // ETHTOOL_MSG_RSS_CREATE_ACT
	msgRSSDeleteAct = 0x32 // ETHTOOL_MSG_RSS_DELETE_ACT

	// maxCableLengthCM is MAX_CABLE_LENGTH_CM (include/linux/ethtool_netlink.h).
	maxCableLengthCM = 150 * 100
	// cablePairD is ETHTOOL_A_CABLE_PAIR_D, the last pair a TDR test may name.
	cablePairD = 3
)

func nested(s *nlattr.Set) nlattr.Policy { return nlattr.Policy{Kind: nlattr.Nested, Nested: s} }

var (
	u32Pol    = nlattr.Policy{Kind: nlattr.U32}
	u8Pol     = nlattr.Policy{Kind: nlattr.U8}
	bitsetPol = nlattr.Policy{Kind: nlattr.Nested} // a bitset nest, parsed by its handler
)

func u8Max(max uint64) nlattr.Policy {
	return nlattr.Policy{Kind: nlattr.U8, Check: nlattr.CheckMax, Max: max}
}

func u32Range(lo, hi uint64) nlattr.Policy {
	return nlattr.Policy{Kind: nlattr.U32, Check: nlattr.CheckRange, Min: lo, Max: hi}
}

// The request policies, each the kernel's ethnl_*_policy of the op
// (checked against the running kernel's CTRL_CMD_GETPOLICY by
// TestGetPolicyMatchesKernel).
var (
	basicHdr = nested(ethtool.Policy().Header)
	statsHdr = nested(statsHeader())
	phyHdr   = nested(ethtool.Policy().HeaderPhy)

	debugGetPolicy = headerOnly()
	debugSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_DEBUG_MSGMASK, map[uint16]nlattr.Policy{
		1: basicHdr, unix.ETHTOOL_A_DEBUG_MSGMASK: bitsetPol})
	wolGetPolicy = headerOnly()
	wolSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_WOL_SOPASS, map[uint16]nlattr.Policy{
		1: basicHdr, unix.ETHTOOL_A_WOL_MODES: bitsetPol,
		unix.ETHTOOL_A_WOL_SOPASS: {Kind: nlattr.Binary, Len: 6}}) // SOPASS_MAX
	// pauseStatsSrc is ETHTOOL_A_PAUSE_STATS_SRC (x/sys/unix stops at STATS).
	pauseStatsSrc  = uint16(unix.ETHTOOL_A_PAUSE_STATS + 1)
	pauseGetPolicy = nlattr.NewSet(pauseStatsSrc, map[uint16]nlattr.Policy{
		1: statsHdr, pauseStatsSrc: {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: 2}}) // ETHTOOL_MAC_STATS_SRC_PMAC
	pauseSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_PAUSE_TX, map[uint16]nlattr.Policy{
		1: basicHdr, unix.ETHTOOL_A_PAUSE_AUTONEG: u8Pol, unix.ETHTOOL_A_PAUSE_RX: u8Pol, unix.ETHTOOL_A_PAUSE_TX: u8Pol})
	eeeGetPolicy = headerOnly()
	eeeSetPolicy = nlattr.NewSet(unix.ETHTOOL_A_EEE_TX_LPI_TIMER, map[uint16]nlattr.Policy{
		1: basicHdr, unix.ETHTOOL_A_EEE_MODES_OURS: bitsetPol, unix.ETHTOOL_A_EEE_ENABLED: u8Pol,
		unix.ETHTOOL_A_EEE_TX_LPI_ENABLED: u8Pol, unix.ETHTOOL_A_EEE_TX_LPI_TIMER: u32Pol})
	cableTestPolicy    = nlattr.NewSet(unix.ETHTOOL_A_CABLE_TEST_HEADER, map[uint16]nlattr.Policy{1: phyHdr})
	cableTestTDRPolicy = nlattr.NewSet(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG, map[uint16]nlattr.Policy{
		1: phyHdr, unix.ETHTOOL_A_CABLE_TEST_TDR_CFG: {Kind: nlattr.Nested}})
	// cableTestTDRCfgPolicy is cable_test_tdr_act_cfg_policy, applied by the handler.
	cableTestTDRCfgPolicy = nlattr.NewSet(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR, map[uint16]nlattr.Policy{
		unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_FIRST: u32Pol, unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_LAST: u32Pol,
		unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_STEP: u32Pol, unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR: u8Pol})
	tunnelInfoPolicy = headerOnly()
	fecGetPolicy     = nlattr.NewSet(1, map[uint16]nlattr.Policy{1: statsHdr})
	fecSetPolicy     = nlattr.NewSet(fecAAuto, map[uint16]nlattr.Policy{1: basicHdr, 2: bitsetPol, fecAAuto: u8Max(1)})
	eepromGetPolicy  = nlattr.NewSet(moduleEEPROMAI2CAddress, map[uint16]nlattr.Policy{
		1:                       basicHdr,
		moduleEEPROMAOffset:     {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: 2*moduleEEPROMPageLen - 1},
		moduleEEPROMALength:     u32Range(1, moduleEEPROMPageLen),
		moduleEEPROMAPage:       u8Pol,
		moduleEEPROMABank:       u8Pol,
		moduleEEPROMAI2CAddress: u8Max(moduleMaxI2CAddress),
	})
	phcVclocksPolicy = headerOnly()
	moduleGetPolicy  = headerOnly()
	moduleSetPolicy  = nlattr.NewSet(moduleAPowerModePolicy, map[uint16]nlattr.Policy{
		1: basicHdr, moduleAPowerModePolicy: {Kind: nlattr.U8, Check: nlattr.CheckRange, Min: 1, Max: 2}}) // HIGH..AUTO
	pseGetPolicy = nlattr.NewSet(1, map[uint16]nlattr.Policy{1: phyHdr})
	pseSetPolicy = nlattr.NewSet(psePrio, map[uint16]nlattr.Policy{
		1:                   phyHdr,
		psePodlAdminControl: u32Range(2, pseAdminStateEnabled), // DISABLED..ENABLED
		pseC33AdminControl:  u32Range(2, pseAdminStateEnabled),
		pseC33AvailPwLimit:  u32Pol,
		psePrio:             u32Pol,
	})
	plcaGetPolicy = nlattr.NewSet(1, map[uint16]nlattr.Policy{1: phyHdr})
	plcaSetPolicy = nlattr.NewSet(plcaABurstTmr, map[uint16]nlattr.Policy{
		1: phyHdr, plcaAEnabled: u8Max(1), plcaANodeCnt: u32Range(1, 255),
		plcaANodeID: u32Range(0, 255), plcaAToTmr: u32Range(0, 255),
		plcaABurstCnt: u32Range(0, 255), plcaABurstTmr: u32Range(0, 255),
	})
	mmGetPolicy = nlattr.NewSet(1, map[uint16]nlattr.Policy{1: statsHdr})
	mmSetPolicy = nlattr.NewSet(mmAVerifyTime, map[uint16]nlattr.Policy{
		1: basicHdr, mmAPmacEnabled: u8Max(1), mmATxEnabled: u8Max(1),
		mmATxMinFrag: u32Range(60, 252), mmAVerifyOn: u8Max(1), mmAVerifyTime: u32Range(1, 128),
	})
	fwFlashPolicy = nlattr.NewSet(fwFlashAPassword, map[uint16]nlattr.Policy{
		1: basicHdr, fwFlashAFileName: {Kind: nlattr.NulString}, fwFlashAPassword: u32Pol})
	phyGetPolicy       = headerOnly()
	tsconfigGetPolicy  = headerOnly()
	hwtstampProvPolicy = nlattr.NewSet(2, map[uint16]nlattr.Policy{
		1: u32Pol, 2: u32Range(0, 1)}) // ETHTOOL_A_TS_HWTSTAMP_PROVIDER_INDEX, _QUALIFIER (≤ HWTSTAMP_PROVIDER_QUALIFIER_APPROX)
	tsconfigSetPolicy = nlattr.NewSet(tsconfigAHwtstampFlags, map[uint16]nlattr.Policy{
		1: basicHdr, tsconfigAHwtstampProvider: nested(hwtstampProvPolicy),
		tsconfigATxTypes: bitsetPol, tsconfigARxFilters: bitsetPol, tsconfigAHwtstampFlags: bitsetPol,
	})
	rssCreatePolicy = nlattr.NewSet(rssAInputXfrm, map[uint16]nlattr.Policy{
		1:             basicHdr,
		rssAContext:   {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
		rssAHFunc:     {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1},
		rssAIndir:     {Kind: nlattr.Binary, Check: nlattr.CheckMin, Min: 1},
		rssAHKey:      {Kind: nlattr.Binary, Check: nlattr.CheckMin, Min: 1},
		rssAInputXfrm: {Kind: nlattr.U32, Check: nlattr.CheckMax, Max: 2}, // RXH_XFRM_SYM_OR_XOR
	})
	rssDeletePolicy = nlattr.NewSet(rssAContext, map[uint16]nlattr.Policy{
		1: basicHdr, rssAContext: {Kind: nlattr.U32, Check: nlattr.CheckMin, Min: 1}})
)

// NoCallback returns the ops of the kernel's ethtool family that mana has no
// callback for, in the kernel's form: GETs with do and dump, SETs and ACTs
// with do only and GENL_UNS_ADMIN_PERM.
func (ethtoolMsgs) NoCallback() []op {
	return []op{
		ethGetOp(unix.ETHTOOL_MSG_DEBUG_GET, "debug-get", debugGetPolicy, noCallback(unix.ETHTOOL_MSG_DEBUG_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_DEBUG_SET, "debug-set", debugSetPolicy),
		adminGetOp(unix.ETHTOOL_MSG_WOL_GET, "wol-get", wolGetPolicy, noCallback(unix.ETHTOOL_MSG_WOL_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_WOL_SET, "wol-set", wolSetPolicy),
		ethGetOp(unix.ETHTOOL_MSG_PAUSE_GET, "pause-get", pauseGetPolicy, noCallback(unix.ETHTOOL_MSG_PAUSE_GET_REPLY, pauseParse)),
		noCallbackSet(unix.ETHTOOL_MSG_PAUSE_SET, "pause-set", pauseSetPolicy),
		ethGetOp(unix.ETHTOOL_MSG_EEE_GET, "eee-get", eeeGetPolicy, noCallback(unix.ETHTOOL_MSG_EEE_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_EEE_SET, "eee-set", eeeSetPolicy),
		actOp(unix.ETHTOOL_MSG_CABLE_TEST_ACT, "cable-test-act", cableTestPolicy, cableTestAct(false)),
		actOp(unix.ETHTOOL_MSG_CABLE_TEST_TDR_ACT, "cable-test-tdr-act", cableTestTDRPolicy, cableTestAct(true)),
		{cmd: unix.ETHTOOL_MSG_TUNNEL_INFO_GET, name: "tunnel-info-get", policy: tunnelInfoPolicy, mode: nlattr.Strict, dumpMode: nlattr.Strict,
			doit: (*Server).tunnelInfoDoit, start: (*Server).tunnelInfoStart, dumpit: (*Server).tunnelInfoDumpit},
		ethGetOp(unix.ETHTOOL_MSG_FEC_GET, "fec-get", fecGetPolicy, noCallback(unix.ETHTOOL_MSG_FEC_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_FEC_SET, "fec-set", fecSetPolicy),
		adminGetOp(unix.ETHTOOL_MSG_MODULE_EEPROM_GET, "module-eeprom-get", eepromGetPolicy, noCallback(unix.ETHTOOL_MSG_MODULE_EEPROM_GET_REPLY, eepromParse)),
		ethGetOp(unix.ETHTOOL_MSG_PHC_VCLOCKS_GET, "phc-vclocks-get", phcVclocksPolicy, headerOnlyGet(unix.ETHTOOL_MSG_PHC_VCLOCKS_GET_REPLY)),
		ethGetOp(unix.ETHTOOL_MSG_MODULE_GET, "module-get", moduleGetPolicy, headerOnlyGet(unix.ETHTOOL_MSG_MODULE_GET_REPLY)),
		ethSetOp(unix.ETHTOOL_MSG_MODULE_SET, "module-set", moduleSetPolicy, "", nil, moduleSetApply),
		ethGetOp(unix.ETHTOOL_MSG_PSE_GET, "pse-get", pseGetPolicy, pseGet()),
		ethSetOp(unix.ETHTOOL_MSG_PSE_SET, "pse-set", pseSetPolicy, "", nil, pseSetApply),
		ethGetOp(unix.ETHTOOL_MSG_PLCA_GET_CFG, "plca-get-cfg", plcaGetPolicy, plcaGet(unix.ETHTOOL_MSG_PLCA_GET_CFG_REPLY)),
		ethSetOp(unix.ETHTOOL_MSG_PLCA_SET_CFG, "plca-set-cfg", plcaSetPolicy, "", nil, noPhyApply),
		ethGetOp(unix.ETHTOOL_MSG_PLCA_GET_STATUS, "plca-get-status", plcaGetPolicy, plcaGet(unix.ETHTOOL_MSG_PLCA_GET_STATUS_REPLY)),
		ethGetOp(unix.ETHTOOL_MSG_MM_GET, "mm-get", mmGetPolicy, noCallback(unix.ETHTOOL_MSG_MM_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_MM_SET, "mm-set", mmSetPolicy),
		actOp(unix.ETHTOOL_MSG_MODULE_FW_FLASH_ACT, "module-fw-flash-act", fwFlashPolicy, devAct(nil, nlattr.Errorf(unix.EOPNOTSUPP,
			"Flashing module firmware is not supported by this device"))),
		ethGetOp(unix.ETHTOOL_MSG_PHY_GET, "phy-get", phyGetPolicy, noCallback(unix.ETHTOOL_MSG_PHY_GET_REPLY, nil)),
		ethGetOp(unix.ETHTOOL_MSG_TSCONFIG_GET, "tsconfig-get", tsconfigGetPolicy, noCallback(unix.ETHTOOL_MSG_TSCONFIG_GET_REPLY, nil)),
		noCallbackSet(unix.ETHTOOL_MSG_TSCONFIG_SET, "tsconfig-set", tsconfigSetPolicy),
		actOp(msgRSSCreateAct, "rss-create-act", rssCreatePolicy, devAct(nil, unix.EOPNOTSUPP)),
		actOp(msgRSSDeleteAct, "rss-delete-act", rssDeletePolicy, devAct([]uint16{rssAContext}, unix.EOPNOTSUPP)),
	}
}

// adminGetOp is a GET that needs GENL_UNS_ADMIN_PERM (WOL_GET, MODULE_EEPROM_GET).
func adminGetOp(cmd uint8, name string, pol *nlattr.Set, g *ethGet) op {
	o := ethGetOp(cmd, name, pol, g)
	o.perm = unix.GENL_UNS_ADMIN_PERM
	return o
}

// actOp is an ACT (or a SET with its own doit): do only, GENL_UNS_ADMIN_PERM.
func actOp(cmd uint8, name string, pol *nlattr.Set, doit func(*Server, *request) error) op {
	return op{cmd: cmd, name: name, perm: unix.GENL_UNS_ADMIN_PERM, policy: pol, mode: nlattr.Strict, doit: doit}
}

// noCallbackSet mirrors ethnl_default_set_doit for a set_validate that
// answers EOPNOTSUPP (the driver lacks the get or the set callback).
func noCallbackSet(cmd uint8, name string, pol *nlattr.Set) op {
	return ethSetOp(cmd, name, pol, "", nil, func(*request, Device) error { return unix.EOPNOTSUPP })
}

// noCallback is a GET whose prepare_data finds no driver callback:
// EOPNOTSUPP after parse (the op's parse_request), as debug_prepare_data,
// wol_prepare_data, pause_prepare_data, eee_prepare_data, fec_prepare_data,
// eeprom_prepare_data (no get_module_info), mm_prepare_data,
// tsconfig_prepare_data (no ndo_hwtstamp_get) and, since 6.18, the PHY_GET
// of a device without a PHY. The dump skips every device.
func noCallback(replyCmd uint8, parse func(*request) (any, error)) *ethGet {
	return &ethGet{
		replyCmd: replyCmd,
		parse:    parse,
		prepare:  func(*request, *Device, any) (any, error) { return nil, unix.EOPNOTSUPP },
		fill:     func(*request, *nlattr.Builder, any, any, bool) error { return nil },
	}
}

// headerOnlyGet is a GET whose reply carries the device header and nothing
// else for mana: phc_vclocks_fill_reply without virtual clocks (mana's
// timestamping has no PHC), module_fill_reply without
// get_module_power_mode.
func headerOnlyGet(replyCmd uint8) *ethGet {
	return &ethGet{
		replyCmd: replyCmd,
		prepare:  func(*request, *Device, any) (any, error) { return nil, nil },
		fill:     func(*request, *nlattr.Builder, any, any, bool) error { return nil },
	}
}

// pauseParse mirrors pause_parse_request: a stats source needs
// ETHTOOL_FLAG_STATS in the header.
func pauseParse(r *request) (any, error) {
	if r.attr(pauseStatsSrc).Present() && !wantStats(r) {
		return nil, nlattr.Errorf(unix.EINVAL, "ethtool_nl: ETHTOOL_FLAG_STATS must be set when requesting a source of stats")
	}
	return nil, nil
}

// eepromParse mirrors eeprom_parse_request: offset, length, page and I2C
// address are required, and a read stays within one half page.
func eepromParse(r *request) (any, error) {
	off, length, page := r.attr(moduleEEPROMAOffset), r.attr(moduleEEPROMALength), r.attr(moduleEEPROMAPage)
	if !off.Present() || !length.Present() || !page.Present() || !r.attr(moduleEEPROMAI2CAddress).Present() {
		return nil, unix.EINVAL
	}
	o, l := off.U32(), length.U32()
	if page.U8() != 0 && o < moduleEEPROMPageLen {
		return nil, nlattr.AttrError(unix.EINVAL, page, "reading from lower half page is allowed for page 0 only")
	}
	if o < moduleEEPROMPageLen && o+l > moduleEEPROMPageLen {
		return nil, nlattr.AttrError(unix.EINVAL, length, "reading cross half page boundary is illegal")
	}
	if o+l > 2*moduleEEPROMPageLen {
		return nil, nlattr.AttrError(unix.EINVAL, length, "reading cross page boundary is illegal")
	}
	return nil, nil
}

// phyIndex returns the request header's ETHTOOL_A_HEADER_PHY_INDEX (absent
// when the op's header policy has none, or the request names none).
func phyIndex(r *request) nlattr.Attr {
	hdr := r.attr(hdrAttr)
	for it := nlattr.NewIter(hdr.Data, 0, len(hdr.Data)); it.Next(); {
		if a := it.Attr(); a.Type() == ethtool.HeaderPhyIndex {
			return hdr
		}
	}
	return nlattr.Attr{}
}

// noPhy is what ethnl_req_get_phydev leaves for mana, which has no PHY: with
// a PHY index in the header, ENODEV "no phy matching phyindex" blaming the
// header (no PHY link topology); without one, nil: the device's PHY, none.
func noPhy(r *request) error {
	if r.hdr.Flags&nlattr.FlagDump == nlattr.FlagDump {
		// A dump's request info has no device (ethnl_default_start drops it), so
		// ethnl_req_get_phydev finds no PHY whatever the index.
		return nil
	}
	if hdr := phyIndex(r); hdr.Present() {
		return nlattr.AttrError(unix.ENODEV, hdr, "no phy matching phyindex")
	}
	return nil
}

// asNoPhy turns the ENODEV of noPhy into the EOPNOTSUPP of a caller that
// treats IS_ERR_OR_NULL(phydev) as "not supported", keeping the extack
// message and offset ethnl_req_get_phydev set (cable tests, PLCA).
func asNoPhy(err error, msg string) error {
	if ne := (*nlattr.Error)(nil); errors.As(err, &ne) {
		e := *ne
		e.Errno = unix.EOPNOTSUPP
		if msg != "" {
			e.Message = msg
		}
		return &e
	}
	if msg != "" {
		return nlattr.Errorf(unix.EOPNOTSUPP, "%s", msg)
	}
	return unix.EOPNOTSUPP
}

// pseGet mirrors pse_prepare_data: a PHY index that matches nothing is
// ENODEV; otherwise there is no PHY ("No PHY found").
func pseGet() *ethGet {
	g := noCallback(unix.ETHTOOL_MSG_PSE_GET_REPLY, nil)
	g.prepare = func(r *request, _ *Device, _ any) (any, error) {
		if err := noPhy(r); err != nil {
			return nil, err
		}
		return nil, nlattr.Errorf(unix.EOPNOTSUPP, "No PHY found")
	}
	return g
}

// plcaGet mirrors plca_get_cfg_prepare_data and plca_get_status_prepare_data:
// IS_ERR_OR_NULL(phydev) is EOPNOTSUPP, with the lookup's extack.
func plcaGet(replyCmd uint8) *ethGet {
	g := noCallback(replyCmd, nil)
	g.prepare = func(r *request, _ *Device, _ any) (any, error) {
		return nil, asNoPhy(noPhy(r), "")
	}
	return g
}

// noPhyApply mirrors ethnl_set_plca: no PHY is EOPNOTSUPP.
func noPhyApply(r *request, _ Device) error { return asNoPhy(noPhy(r), "") }

// pseSetApply mirrors ethnl_set_pse_validate: no PHY is EOPNOTSUPP "No PHY
// is attached" (after a PHY index lookup, its offset stays).
func pseSetApply(r *request, _ Device) error {
	return asNoPhy(noPhy(r), "No PHY is attached")
}

// moduleSetApply mirrors ethnl_set_module_validate: without a power mode
// policy there is nothing to do (success, no notification); with one,
// mana's missing set_module_power_mode is EOPNOTSUPP.
func moduleSetApply(r *request, _ Device) error {
	if a := r.attr(moduleAPowerModePolicy); a.Present() {
		return nlattr.AttrError(unix.EOPNOTSUPP, a, "Setting power mode policy is not supported by this device")
	}
	return nil
}

// devAct is an ACT handler that checks the required attributes
// (GENL_REQ_ATTR_CHECK, before the header as ethnl_rss_delete_doit), resolves
// the device as ethnl_parse_header_dev_get (a missing header is "request
// header missing") and then fails with err: the driver lacks the callback
// (ethnl_act_module_fw_flash, ethnl_rss_create_doit, ethnl_rss_delete_doit).
func devAct(required []uint16, err error) func(*Server, *request) error {
	return func(_ *Server, r *request) error {
		for _, t := range required {
			if !r.attr(t).Present() {
				return nlattr.Missing(nlattr.Attr{}, t)
			}
		}
		if _, _, e := r.parseHeader(r.attr(hdrAttr), true); e != nil {
			return e
		}
		return err
	}
}

// cableTestAct mirrors ethnl_act_cable_test and ethnl_act_cable_test_tdr:
// the header and device, the TDR configuration (ethnl_act_cable_test_tdr_cfg),
// then mana's missing PHY is EOPNOTSUPP (with the lookup's extack when the
// header named a PHY index).
func cableTestAct(tdr bool) func(*Server, *request) error {
	return func(_ *Server, r *request) error {
		if _, _, err := r.parseHeader(r.attr(hdrAttr), true); err != nil {
			return err
		}
		if tdr {
			if err := cableTestTDRCfg(r, r.attr(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG)); err != nil {
				return err
			}
		}
		return asNoPhy(noPhy(r), "")
	}
}

// cableTestTDRCfg mirrors ethnl_act_cable_test_tdr_cfg's checks of the
// distances (in cm) and the pair.
func cableTestTDRCfg(r *request, nest nlattr.Attr) error {
	if !nest.Present() {
		return nil
	}
	tb, err := nlattr.ParseNested(r.msg, nest, cableTestTDRCfgPolicy)
	if err != nil {
		return err
	}
	first, last, step := uint32(100), uint32(maxCableLengthCM), uint32(100) // TDR_DEFAULT_STEP
	fa, la, sa, pa := tb[unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_FIRST], tb[unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_LAST],
		tb[unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_STEP], tb[unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR]
	if fa.Present() {
		first = fa.U32()
	}
	if la.Present() {
		last = la.U32()
	}
	if sa.Present() {
		step = sa.U32()
	}
	switch {
	case pa.Present() && pa.U8() > cablePairD:
		return nlattr.AttrError(unix.EINVAL, pa, "invalid pair parameter")
	case first > maxCableLengthCM:
		return nlattr.AttrError(unix.EINVAL, fa, "invalid first parameter")
	case last > maxCableLengthCM:
		return nlattr.AttrError(unix.EINVAL, la, "invalid last parameter")
	case first > last:
		return nlattr.Errorf(unix.EINVAL, "invalid first/last parameter")
	case step == 0:
		return nlattr.AttrError(unix.EINVAL, sa, "invalid step parameter")
	case step > last-first:
		return nlattr.AttrError(unix.EINVAL, sa, "step parameter too big")
	}
	return nil
}

// tunnelInfoDoit mirrors ethnl_tunnel_info_doit: mana has no
// udp_tunnel_nic_info.
func (s *Server) tunnelInfoDoit(r *request) error {
	if _, _, err := r.parseHeader(r.attr(unix.ETHTOOL_A_TUNNEL_INFO_HEADER), true); err != nil {
		return err
	}
	return nlattr.Errorf(unix.EOPNOTSUPP, "device does not report tunnel offload info")
}

// tunnelInfoStart mirrors ethnl_tunnel_info_start: the header is parsed (a
// named device must exist) and then ignored.
func (s *Server) tunnelInfoStart(r *request) error {
	_, _, err := r.parseHeader(r.attr(unix.ETHTOOL_A_TUNNEL_INFO_HEADER), false)
	return err
}

// tunnelInfoDumpit mirrors ethnl_tunnel_info_dumpit: each device without
// tunnel info is skipped, and the dump ends with the last device's result,
// so a dump over mana ports ends with EOPNOTSUPP (without extack).
func (s *Server) tunnelInfoDumpit(r *request, _ *dumper) error {
	devs, err := s.cfg.Backend.Devices(r.ctx, r.c.caller)
	if err != nil || len(devs) == 0 {
		return err
	}
	return unix.EOPNOTSUPP
}
