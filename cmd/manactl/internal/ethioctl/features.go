package ethioctl

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
)

// Netdev features. The ioctls number them by netdev feature bit; manad's FEATURES_GET names
// them; the ETH_SS_FEATURES string set (netdev_features_strings) maps one to the other, and its
// length is NETDEV_FEATURE_COUNT, hence ETHTOOL_DEV_FEATURE_WORDS.

// featureState is a device's features by name.
type featureState struct {
	hw, wanted, active, noChange map[string]bool
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (c *call) featureState() (*featureState, error) {
	f, err := c.c.Features(c.ctx, c.ifi)
	if err != nil {
		return nil, c.manadErr("FEATURES_GET", err)
	}
	return &featureState{hw: setOf(f.HW), wanted: setOf(f.Wanted), active: setOf(f.Active), noChange: setOf(f.NoChange)}, nil
}

// featureNames returns netdev_features_strings, by bit.
func (c *call) featureNames() ([]string, error) {
	sets, err := c.stringSets(ethtool.SSFeatures)
	if err != nil {
		return nil, err
	}
	names := sets[ethtool.SSFeatures]
	if len(names) == 0 {
		return nil, unix.EOPNOTSUPP
	}
	return names, nil
}

// featureWords returns the u32 words of the named features that are in set.
func featureWords(names []string, set map[string]bool) []uint32 {
	w := make([]uint32, (len(names)+31)/32)
	for i, n := range names {
		if set[n] {
			w[i/32] |= 1 << (i % 32)
		}
	}
	return w
}

// getFeatures mirrors ethtool_get_features: size is ETHTOOL_DEV_FEATURE_WORDS, and as many
// blocks follow as the smaller of it and the caller's size.
func (c *call) getFeatures() error {
	names, err := c.featureNames()
	if err != nil {
		return err
	}
	st, err := c.featureState()
	if err != nil {
		return err
	}
	words := (len(names) + 31) / 32
	var b [4]byte
	if err := c.read(4, b[:]); err != nil {
		return err
	}
	n := min(int(binary.NativeEndian.Uint32(b[:])), words)
	hw, wanted, active, never := featureWords(names, st.hw), featureWords(names, st.wanted),
		featureWords(names, st.active), featureWords(names, st.noChange)
	blocks := make([]getFeaturesBlock, n)
	for i := range blocks {
		blocks[i] = getFeaturesBlock{Available: hw[i], Requested: wanted[i], Active: active[i], NeverChanged: never[i]}
	}
	if err := c.writeStruct(0, &featuresHead{Cmd: unix.ETHTOOL_GFEATURES, Size: uint32(words)}); err != nil {
		return err
	}
	return c.writeStruct(8, blocks)
}

// setFeatures mirrors ethtool_set_features and returns its flags: size must be
// ETHTOOL_DEV_FEATURE_WORDS; a valid bit past the features or never changeable is EINVAL; valid
// bits the device cannot change are dropped with ETHTOOL_F_UNSUPPORTED; the rest go to manad's
// FEATURES_SET as wanted; ETHTOOL_F_WISH when, after it, one of them is not active as wanted.
func (c *call) setFeatures() (int, error) {
	var hd featuresHead
	if err := c.readStruct(0, &hd); err != nil {
		return 0, err
	}
	names, err := c.featureNames()
	if err != nil {
		return 0, err
	}
	words := (len(names) + 31) / 32
	if int(hd.Size) != words || hd.Size > 2 {
		// netdev_features_t is 64 bits: a larger count is not a kernel's.
		return 0, unix.EINVAL
	}
	blocks := make([]setFeaturesBlock, words)
	if err := c.readStruct(8, blocks); err != nil {
		return 0, err
	}
	st, err := c.featureState()
	if err != nil {
		return 0, err
	}
	ret := 0
	want := map[string]bool{}
	for i, blk := range blocks {
		for bit := range 32 {
			if blk.Valid&(1<<bit) == 0 {
				continue
			}
			f := 32*i + bit
			if f >= len(names) || st.noChange[names[f]] {
				return 0, unix.EINVAL // valid & ~NETIF_F_ETHTOOL_BITS
			}
			if !st.hw[names[f]] {
				ret |= unix.ETHTOOL_F_UNSUPPORTED
				continue
			}
			want[names[f]] = blk.Requested&(1<<bit) != 0
		}
	}
	if len(want) == 0 {
		return ret, nil
	}
	if _, err := c.c.SetFeatures(c.ctx, c.ifi, want); err != nil {
		return 0, c.manadErr("FEATURES_SET", err)
	}
	after, err := c.featureState()
	if err != nil {
		return 0, err
	}
	for n := range want {
		if after.wanted[n] != after.active[n] {
			ret |= unix.ETHTOOL_F_WISH
			break
		}
	}
	return ret, nil
}

// featureMasks are ethtool_get_feature_mask's, by name: the features one legacy get or set
// covers.
var featureMasks = map[uint32][]string{
	unix.ETHTOOL_GTXCSUM: {"tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-fcoe-crc", "tx-checksum-sctp"},
	unix.ETHTOOL_GRXCSUM: {"rx-checksum"},
	unix.ETHTOOL_GSG:     {"tx-scatter-gather", "tx-scatter-gather-fraglist"},
	unix.ETHTOOL_GTSO:    {"tx-tcp-segmentation", "tx-tcp6-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation"},
	unix.ETHTOOL_GGSO:    {"tx-generic-segmentation"},
	unix.ETHTOOL_GGRO:    {"rx-gro"},
}

// legacyGet maps each legacy set to its get, which names the mask.
var legacyGet = map[uint32]uint32{
	unix.ETHTOOL_STXCSUM: unix.ETHTOOL_GTXCSUM,
	unix.ETHTOOL_SRXCSUM: unix.ETHTOOL_GRXCSUM,
	unix.ETHTOOL_SSG:     unix.ETHTOOL_GSG,
	unix.ETHTOOL_STSO:    unix.ETHTOOL_GTSO,
	unix.ETHTOOL_SGSO:    unix.ETHTOOL_GGSO,
	unix.ETHTOOL_SGRO:    unix.ETHTOOL_GGRO,
}

// getOneFeature mirrors ethtool_get_one_feature: 1 when any feature of the mask is active.
func (c *call) getOneFeature() error {
	st, err := c.featureState()
	if err != nil {
		return err
	}
	v := value{Cmd: c.cmd}
	for _, n := range featureMasks[c.cmd] {
		if st.active[n] {
			v.Data = 1
		}
	}
	return c.writeStruct(0, &v)
}

// setOneFeature mirrors ethtool_set_one_feature: the mask's features the device can change are
// wanted on or off (FEATURES_SET); none is EOPNOTSUPP.
func (c *call) setOneFeature() error {
	var in value
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	st, err := c.featureState()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range featureMasks[legacyGet[c.cmd]] {
		if st.hw[n] {
			want[n] = in.Data != 0
		}
	}
	if len(want) == 0 {
		return unix.EOPNOTSUPP
	}
	if _, err := c.c.SetFeatures(c.ctx, c.ifi, want); err != nil {
		return c.manadErr("FEATURES_SET", err)
	}
	return nil
}

// legacyFlags are ETH_FLAG_* and their features (__ethtool_get_flags).
var legacyFlags = []struct {
	flag uint32
	name string
}{
	{1 << 15, "rx-lro"},           // ETH_FLAG_LRO
	{1 << 8, "rx-vlan-hw-parse"},  // ETH_FLAG_RXVLAN
	{1 << 7, "tx-vlan-hw-insert"}, // ETH_FLAG_TXVLAN
	{1 << 27, "rx-ntuple-filter"}, // ETH_FLAG_NTUPLE
	{1 << 28, "rx-hashing"},       // ETH_FLAG_RXHASH
}

// getFlags mirrors ethtool_get_value with __ethtool_get_flags.
func (c *call) getFlags() error {
	st, err := c.featureState()
	if err != nil {
		return err
	}
	v := value{Cmd: unix.ETHTOOL_GFLAGS}
	for _, f := range legacyFlags {
		if st.active[f.name] {
			v.Data |= f.flag
		}
	}
	return c.writeStruct(0, &v)
}

// setFlags mirrors ethtool_set_value with __ethtool_set_flags: unknown flags are EINVAL; a
// changed feature the device cannot change is EINVAL when another changed one can, else
// EOPNOTSUPP; the changed ones go to manad's FEATURES_SET.
func (c *call) setFlags() error {
	var in value
	if err := c.readStruct(0, &in); err != nil {
		return err
	}
	var all uint32
	for _, f := range legacyFlags {
		all |= f.flag
	}
	if in.Data&^all != 0 {
		return unix.EINVAL
	}
	st, err := c.featureState()
	if err != nil {
		return err
	}
	want := map[string]bool{}
	fixed := false
	for _, f := range legacyFlags {
		on := in.Data&f.flag != 0
		if on == st.active[f.name] {
			continue
		}
		if !st.hw[f.name] {
			fixed = true
			continue
		}
		want[f.name] = on
	}
	if fixed {
		if len(want) > 0 {
			return unix.EINVAL
		}
		return unix.EOPNOTSUPP
	}
	if len(want) == 0 {
		return nil
	}
	if _, err := c.c.SetFeatures(c.ctx, c.ifi, want); err != nil {
		return c.manadErr("FEATURES_SET", err)
	}
	return nil
}
