package tap

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/tap/taptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testGroup is the netdev group the tests put their TAPs in.
const testGroup = 0x6d00beef

// groupMembers lists the names of the links of ns in group g, sorted.
func groupMembers(t *testing.T, ns string, g uint32) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(taptest.IP(t, ns, "-o", "link", "show", "group", strconv.FormatUint(uint64(g), 10)), "\n") {
		// "12: name: <FLAGS> …" (or "name@peer:" for a veth)
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func TestDeleteGroupDeletesEveryTAPAtOnce(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	var devs []*Device
	var names []string
	for range 5 {
		name := taptest.Name("gd")
		devs = append(devs, openTest(t, Config{Name: name, Queues: 2, NetNS: ns, Group: testGroup}))
		names = append(names, name)
	}
	slices.Sort(names)
	// A persistent TAP opened with the group stays out of it; a device of another group stays.
	pers := openTest(t, Config{Name: taptest.Name("gp"), Queues: 1, NetNS: ns, Group: testGroup, Persistent: true})
	other := openTest(t, Config{Name: taptest.Name("go"), Queues: 1, NetNS: ns})
	got := groupMembers(t, ns, testGroup)
	require.True(t, slices.Equal(got, names), "group %d holds %v, want %v", testGroup, got, names)

	require.NoError(t, DeleteGroup(testGroup, devs), "DeleteGroup")
	for i, d := range devs {
		_, ok := taptest.ShowLink(t, ns, names[i])
		assert.False(t, ok, "%s still exists after DeleteGroup", d.Name())
		assert.Equal(t, 2, d.NumQueues(), "%s: %d queues open after DeleteGroup, want them kept until Close", d.Name(), d.NumQueues())
		assert.NoError(t, d.Close(), "Close after DeleteGroup")
	}
	for _, d := range []*Device{pers, other} {
		_, ok := taptest.ShowLink(t, ns, d.Name())
		assert.True(t, ok, "%s, not in the group, was deleted", d.Name())
	}
}

func TestDeleteGroupRefusesAndDeletesNothing(t *testing.T) {
	taptest.Require(t)
	g := strconv.FormatUint(testGroup, 10)
	tests := []struct {
		name  string
		errno unix.Errno
		// setup gets the namespace and two grouped TAPs and returns the group and devices to
		// pass to DeleteGroup.
		setup func(t *testing.T, ns string, a, b *Device) (uint32, []*Device)
	}{
		{"group 0", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			return 0, []*Device{a, b}
		}},
		{"no devices", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			return testGroup, nil
		}},
		{"device twice", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			return testGroup, []*Device{a, b, a}
		}},
		{"device of another group", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			return testGroup + 1, []*Device{a, b}
		}},
		{"persistent device", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			p := openTest(t, Config{Name: taptest.Name("gp"), Queues: 1, NetNS: ns, Group: testGroup, Persistent: true})
			return testGroup, []*Device{a, b, p}
		}},
		{"device of another namespace", unix.EINVAL, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			c := openTest(t, Config{Name: taptest.Name("gn"), Queues: 1, NetNS: taptest.NetNS(t), Group: testGroup})
			return testGroup, []*Device{a, b, c}
		}},
		{"closed device", unix.ENODEV, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			c := openTest(t, Config{Name: taptest.Name("gc"), Queues: 1, NetNS: ns, Group: testGroup})
			c.Close()
			return testGroup, []*Device{a, b, c}
		}},
		{"foreign member of the group", unix.EEXIST, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			taptest.IP(t, ns, "link", "add", taptest.Name("gf"), "group", g, "type", "veth", "peer", "name", taptest.Name("gq"))
			return testGroup, []*Device{a, b}
		}},
		{"grouped TAP not passed", unix.EEXIST, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			return testGroup, []*Device{a}
		}},
		{"TAP taken out of the group", unix.ENOENT, func(t *testing.T, ns string, a, b *Device) (uint32, []*Device) {
			taptest.IP(t, ns, "link", "set", b.Name(), "group", "default")
			return testGroup, []*Device{a, b}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := taptest.NetNS(t)
			a := openTest(t, Config{Name: taptest.Name("ga"), Queues: 1, NetNS: ns, Group: testGroup})
			b := openTest(t, Config{Name: taptest.Name("gb"), Queues: 1, NetNS: ns, Group: testGroup})
			group, devs := tt.setup(t, ns, a, b)
			mid := taptest.IP(t, ns, "-o", "link", "show")
			err := DeleteGroup(group, devs)
			require.ErrorIs(t, err, tt.errno, "DeleteGroup")
			after := taptest.IP(t, ns, "-o", "link", "show")
			assert.Equal(t, mid, after, "a refused DeleteGroup changed the links:\nbefore %s\nafter %s", mid, after)
			// The devices still close (and delete their TAPs) as usual.
			for _, d := range []*Device{a, b} {
				assert.NoError(t, d.Close(), "Close")
				_, ok := taptest.ShowLink(t, ns, d.Name())
				assert.False(t, ok, "%s still exists after Close", d.Name())
			}
		})
	}
}

// A persistent TAP re-attached while carrying the group (it was put there from outside) leaves
// it, so that no group deletion can take it.
func TestPersistentTAPLeavesTheGroup(t *testing.T) {
	taptest.Require(t)
	ns := taptest.NetNS(t)
	name := taptest.Name("gr")
	d := openTest(t, Config{Name: name, Queues: 1, NetNS: ns, Persistent: true})
	taptest.IP(t, ns, "link", "set", name, "group", strconv.FormatUint(testGroup, 10))
	require.NoError(t, d.Close())
	openTest(t, Config{Name: name, Queues: 1, NetNS: ns, Persistent: true, Group: testGroup})
	got := groupMembers(t, ns, testGroup)
	assert.Empty(t, got, "group %d holds %v after re-attaching the persistent TAP, want nothing", testGroup, got)
}
