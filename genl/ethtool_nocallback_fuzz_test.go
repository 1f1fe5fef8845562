package genl

import (
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// addNoCallbackSeeds adds FuzzDispatch seeds for the ethtool messages mana has no callback for,
// those that look at more than the header: a module EEPROM read, a TDR cable test with its
// configuration nest, a PSE set with a PHY index, a module power policy, RSS context deletion
// and a tunnel info dump.
func addNoCallbackSeeds(seeds map[string][]byte, msg func(typ, flags uint16, cmd uint8, fill func(b *nlattr.Builder)) []byte) {
	hdr := func(phy bool) func(b *nlattr.Builder) {
		return func(b *nlattr.Builder) {
			n := b.Nest(hdrAttr)
			b.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, "mana0")
			if phy {
				b.PutU32(4, 1) // ETHTOOL_A_HEADER_PHY_INDEX
			}
			b.EndNest(n)
		}
	}
	seeds["eeprom_get"] = msg(ethtoolID, 0, unix.ETHTOOL_MSG_MODULE_EEPROM_GET, func(b *nlattr.Builder) {
		hdr(false)(b)
		b.PutU32(moduleEEPROMAOffset, 100)
		b.PutU32(moduleEEPROMALength, 100)
		b.PutU8(moduleEEPROMAPage, 1)
		b.PutU8(moduleEEPROMAI2CAddress, 0x50)
	})
	seeds["cable_test_tdr"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_CABLE_TEST_TDR_ACT, func(b *nlattr.Builder) {
		hdr(true)(b)
		n := b.Nest(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG)
		b.PutU32(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_FIRST, 100)
		b.PutU32(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_LAST, 200)
		b.PutU32(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_STEP, 50)
		b.PutU8(unix.ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR, 2)
		b.EndNest(n)
	})
	seeds["pse_set"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_PSE_SET, func(b *nlattr.Builder) {
		hdr(true)(b)
		b.PutU32(psePodlAdminControl, 3)
	})
	seeds["module_set"] = msg(ethtoolID, nlattr.FlagAck, unix.ETHTOOL_MSG_MODULE_SET, func(b *nlattr.Builder) {
		hdr(false)(b)
		b.PutU8(moduleAPowerModePolicy, 2)
	})
	seeds["rss_delete"] = msg(ethtoolID, nlattr.FlagAck, msgRSSDeleteAct, func(b *nlattr.Builder) {
		hdr(false)(b)
		b.PutU32(rssAContext, 1)
	})
	seeds["tunnel_info_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_TUNNEL_INFO_GET, nil)
	seeds["phc_vclocks_dump"] = msg(ethtoolID, nlattr.FlagDump, unix.ETHTOOL_MSG_PHC_VCLOCKS_GET, nil)
}
