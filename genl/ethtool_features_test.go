package genl_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := get()
	// Bits come in the kernel's index order, whatever the backend's order.
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	if diff := cmp.Diff(sorted(hw), sorted(f.Active)); diff != "" || !slices.Equal(f.HW, f.Wanted) {
		t.Errorf("features %+v (-want +got active):\n%s", f, diff)
	}
	if !slices.Contains(f.NoChange, "vlan-challenged") {
		t.Errorf("nochange %v lacks vlan-challenged", f.NoChange)
	}

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
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wanted, ch.Wanted); diff != "" {
				t.Errorf("wanted diff (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.active, ch.Active); diff != "" {
				t.Errorf("active diff (-want +got):\n%s", diff)
			}
			if got := sorted(get().Active); !slices.Equal(got, tc.nowActive) {
				t.Errorf("active now %v, want %v", got, tc.nowActive)
			}
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
			if _, err := c.SetFeatures(ctx, mana0, tc.want); !errors.Is(err, tc.errno) {
				t.Errorf("err %v, want %v", err, tc.errno)
			}
			if diff := cmp.Diff(before, get()); diff != "" {
				t.Errorf("changed by a refused request:\n%s", diff)
			}
		})
	}
	if _, err := c.Features(ctx, client.Interface{Name: "lo0"}); !errors.Is(err, unix.EOPNOTSUPP) {
		t.Errorf("plain device: %v, want EOPNOTSUPP", err)
	}
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
			if km.h.Type != kid || mm.h.Type != mid {
				t.Fatalf("not replies: kernel type %d, manad type %d", km.h.Type, mm.h.Type)
			}
			if km.data[0] != mm.data[0] {
				t.Errorf("reply command: kernel %d, manad %d", km.data[0], mm.data[0])
			}
			if k, m := shape(km.data[4:]), shape(mm.data[4:]); !slices.Equal(k, m) {
				t.Errorf("shape differs:\nkernel %v\nmanad  %v", k, m)
			}
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
		if m.errno != unix.EINVAL || k.errno != m.errno || k.msg != m.msg {
			t.Errorf("kernel %+v\nmanad  %+v", k, m)
		}
	})
}
