package genl_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/nlattr"
)

// TestFeaturesGetSet: FEATURES_GET lists the backend's features by the
// kernel's names; FEATURES_SET changes only the wanted bits it carries,
// keeps bits the driver cannot change, refuses never-changeable ones and
// unknown names, and replies with what did not happen as asked.
func TestFeaturesGetSet(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := ctxT(t)
	mana0 := client.Interface{Name: "mana0"}
	hw := []string{"tx-tcp-segmentation", "rx-gro"}
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) {
		d.Features = genl.Features{HW: hw, Wanted: hw, Active: hw}
	})
	get := func() *client.Features {
		t.Helper()
		f, err := c.Features(ctx, mana0)
		require.NoError(t, err)
		return f
	}
	f := get()
	// Bits come in the kernel's index order, whatever the backend's order.
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	assert.Empty(t, cmp.Diff(sorted(hw), sorted(f.Active)), "features %+v (-want +got active)", f)
	assert.True(t, slices.Equal(f.HW, f.Wanted), "features %+v: wanted is not hw", f)
	assert.True(t, slices.Contains(f.NoChange, "vlan-challenged"), "nochange %v lacks vlan-challenged", f.NoChange)

	for _, tc := range []struct {
		name           string
		want           map[string]bool
		wanted, active map[string]bool
		nowActive      []string
	}{
		{"tso off", map[string]bool{"tx-tcp-segmentation": false}, map[string]bool{}, map[string]bool{"tx-tcp-segmentation": false}, []string{"rx-gro"}},
		{"no-op", map[string]bool{"rx-gro": true}, map[string]bool{}, map[string]bool{}, []string{"rx-gro"}},
		// A bit the driver cannot change is wanted but not active: the reply says so.
		{"fixed bit", map[string]bool{"tx-checksum-ipv4": true}, map[string]bool{"tx-checksum-ipv4": true}, map[string]bool{}, []string{"rx-gro"}},
		// Only the bits the request carries are reported.
		{"tso on", map[string]bool{"tx-tcp-segmentation": true}, map[string]bool{}, map[string]bool{"tx-tcp-segmentation": true}, []string{"rx-gro", "tx-tcp-segmentation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := c.SetFeatures(ctx, mana0, tc.want)
			require.NoError(t, err)
			assert.Empty(t, cmp.Diff(tc.wanted, ch.Wanted), "wanted diff (-want +got)")
			assert.Empty(t, cmp.Diff(tc.active, ch.Active), "active diff (-want +got)")
			got := sorted(get().Active)
			assert.True(t, slices.Equal(got, tc.nowActive), "active now %v, want %v", got, tc.nowActive)
		})
	}

	for name, tc := range map[string]struct {
		want  map[string]bool
		errno unix.Errno
	}{
		"never changeable": {map[string]bool{"vlan-challenged": true}, unix.EINVAL},
		"unknown name":     {map[string]bool{"no-such-feature": true}, unix.EOPNOTSUPP}, // ethnl_parse_bit
	} {
		t.Run(name, func(t *testing.T) {
			before := get()
			_, err := c.SetFeatures(ctx, mana0, tc.want)
			assert.ErrorIs(t, err, tc.errno, "err")
			assert.Empty(t, cmp.Diff(before, get()), "changed by a refused request")
		})
	}
	_, err := c.Features(ctx, client.Interface{Name: "lo0"})
	assert.ErrorIs(t, err, unix.EOPNOTSUPP, "plain device: %v, want EOPNOTSUPP", err)
}

// TestFeaturesMatchKernel asks the kernel about a veth and manad about a
// port: FEATURES_GET replies of the same shape in both bitset forms, and a
// SET of a never-changeable bit refused with the same errno and message.
func TestFeaturesMatchKernel(t *testing.T) {
	veth := makeVeth(t)
	ts := startServer(t, nil)
	ts.be.Update(ts.mana0.Dev.Index, func(d *genl.MemDev) {
		d.Features = genl.Features{HW: []string{"rx-gro"}, Wanted: []string{"rx-gro"}, Active: []string{"rx-gro"}}
	})
	rc := dialRaw(t, ts.path)
	kc := dialKernel(t)
	kid, mid := kc.family("ethtool"), manadFamilyID(t, rc, "ethtool")
	for _, flags := range []uint32{0, unix.ETHTOOL_FLAG_COMPACT_BITSETS} {
		t.Run(fmt.Sprintf("GET/flags=%d", flags), func(t *testing.T) {
			build := func(id uint16, dev string) []byte {
				m := newMsg(id, nlattr.FlagRequest, 9, unix.ETHTOOL_MSG_FEATURES_GET, 1)
				header(m, 1, func(m *msgBuilder) {
					m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev)
					m.PutU32(unix.ETHTOOL_A_HEADER_FLAGS, flags)
				})
				return m.done()
			}
			kc.send(build(kid, veth))
			rc.send(build(mid, "mana0"))
			km, mm := kc.recv()[0], rc.recv()[0]
			require.Equal(t, kid, km.h.Type, "not replies: kernel type %d, manad type %d", km.h.Type, mm.h.Type)
			require.Equal(t, mid, mm.h.Type, "not replies: kernel type %d, manad type %d", km.h.Type, mm.h.Type)
			assert.Equal(t, mm.data[0], km.data[0], "reply command: kernel %d, manad %d", km.data[0], mm.data[0])
			k, m := shape(km.data[4:]), shape(mm.data[4:])
			assert.True(t, slices.Equal(k, m), "shape differs:\nkernel %v\nmanad  %v", k, m)
		})
	}
	t.Run("SET vlan-challenged", func(t *testing.T) {
		build := func(id uint16, dev string) []byte {
			m := newMsg(id, nlattr.FlagRequest|nlattr.FlagAck, 9, unix.ETHTOOL_MSG_FEATURES_SET, 1)
			header(m, 1, func(m *msgBuilder) { m.PutString(unix.ETHTOOL_A_HEADER_DEV_NAME, dev) })
			header(m, unix.ETHTOOL_A_FEATURES_WANTED, func(m *msgBuilder) {
				header(m, unix.ETHTOOL_A_BITSET_BITS, func(m *msgBuilder) {
					header(m, unix.ETHTOOL_A_BITSET_BITS_BIT, func(m *msgBuilder) {
						m.PutString(unix.ETHTOOL_A_BITSET_BIT_NAME, "vlan-challenged")
						m.PutFlag(unix.ETHTOOL_A_BITSET_BIT_VALUE)
					})
				})
			})
			return m.done()
		}
		kc.send(build(kid, veth))
		rc.send(build(mid, "mana0"))
		k, m := decodeAck(t, kc.recv()[0]), decodeAck(t, rc.recv()[0])
		assert.Equal(t, unix.EINVAL, m.errno, "kernel %+v\nmanad  %+v", k, m)
		assert.Equal(t, m.errno, k.errno, "kernel %+v\nmanad  %+v", k, m)
		assert.Equal(t, m.msg, k.msg, "kernel %+v\nmanad  %+v", k, m)
	})
}
