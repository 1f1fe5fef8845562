package genl_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

var updateOps = flag.Bool("update-ops", false, "rewrite testdata/ethtool-ops-6.18.txt from the running kernel (which must be 6.18)")

const opsFile = "testdata/ethtool-ops-6.18.txt"

// ethtoolMsgNames are enum ethtool_msg_type's names (the ETHTOOL_MSG_ prefix
// dropped), for the recorded op list.
var ethtoolMsgNames = []string{1: "STRSET_GET", "LINKINFO_GET", "LINKINFO_SET", "LINKMODES_GET", "LINKMODES_SET",
	"LINKSTATE_GET", "DEBUG_GET", "DEBUG_SET", "WOL_GET", "WOL_SET", "FEATURES_GET", "FEATURES_SET",
	"PRIVFLAGS_GET", "PRIVFLAGS_SET", "RINGS_GET", "RINGS_SET", "CHANNELS_GET", "CHANNELS_SET",
	"COALESCE_GET", "COALESCE_SET", "PAUSE_GET", "PAUSE_SET", "EEE_GET", "EEE_SET", "TSINFO_GET",
	"CABLE_TEST_ACT", "CABLE_TEST_TDR_ACT", "TUNNEL_INFO_GET", "FEC_GET", "FEC_SET", "MODULE_EEPROM_GET",
	"STATS_GET", "PHC_VCLOCKS_GET", "MODULE_GET", "MODULE_SET", "PSE_GET", "PSE_SET", "RSS_GET",
	"PLCA_GET_CFG", "PLCA_SET_CFG", "PLCA_GET_STATUS", "MM_GET", "MM_SET", "MODULE_FW_FLASH_ACT", "PHY_GET",
	"TSCONFIG_GET", "TSCONFIG_SET", "RSS_SET", "RSS_CREATE_ACT", "RSS_DELETE_ACT"}

// famOp is one CTRL_ATTR_OPS entry.
type famOp struct{ id, flags uint32 }

// familyInfo is a GETFAMILY answer's op list (in order) and group names.
type familyInfo struct {
	ops    []famOp
	groups []string
}

func decodeFamily(t *testing.T, m rawMsg) familyInfo {
	t.Helper()
	require.Equal(t, uint16(unix.GENL_ID_CTRL), m.h.Type, "GETFAMILY reply type")
	var fi familyInfo
	for it := nlattr.NewIter(m.data, 4, len(m.data)-4); it.Next(); {
		a := it.Attr()
		switch a.Type() {
		case unix.CTRL_ATTR_OPS:
			for ops := nlattr.NewIter(m.data, a.PayloadOff(), len(a.Data)); ops.Next(); {
				var o famOp
				for in := nlattr.NewIter(m.data, ops.Attr().PayloadOff(), len(ops.Attr().Data)); in.Next(); {
					switch in.Attr().Type() {
					case unix.CTRL_ATTR_OP_ID:
						o.id = in.Attr().U32()
					case unix.CTRL_ATTR_OP_FLAGS:
						o.flags = in.Attr().U32()
					}
				}
				fi.ops = append(fi.ops, o)
			}
		case unix.CTRL_ATTR_MCAST_GROUPS:
			for gs := nlattr.NewIter(m.data, a.PayloadOff(), len(a.Data)); gs.Next(); {
				for in := nlattr.NewIter(m.data, gs.Attr().PayloadOff(), len(gs.Attr().Data)); in.Next(); {
					if in.Attr().Type() == unix.CTRL_ATTR_MCAST_GRP_NAME {
						fi.groups = append(fi.groups, in.Attr().Str())
					}
				}
			}
		}
	}
	return fi
}

func getFamilyReq(name string) []byte {
	m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest, 1, unix.CTRL_CMD_GETFAMILY, 1)
	m.PutString(unix.CTRL_ATTR_FAMILY_NAME, name)
	return m.done()
}

// formatOps renders an op list as the recorded file: one "id name flags" line per op, then the
// multicast group names (their ids are allocated at registration and not compared).
func formatOps(fi familyInfo) string {
	var b strings.Builder
	for _, o := range fi.ops {
		name := "?"
		if int(o.id) < len(ethtoolMsgNames) {
			name = ethtoolMsgNames[o.id]
		}
		fmt.Fprintf(&b, "%d %s %#x\n", o.id, name, o.flags)
	}
	for _, g := range fi.groups {
		fmt.Fprintf(&b, "group %s\n", g)
	}
	return b.String()
}

func readOps(t *testing.T) familyInfo {
	t.Helper()
	b, err := os.ReadFile(opsFile)
	require.NoError(t, err)
	var fi familyInfo
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
		case f[0] == "group" && len(f) == 2:
			fi.groups = append(fi.groups, f[1])
		case len(f) == 3:
			id, err1 := strconv.ParseUint(f[0], 10, 8)
			fl, err2 := strconv.ParseUint(f[2], 0, 32)
			require.NoError(t, err1, sc.Text())
			require.NoError(t, err2, sc.Text())
			require.Equal(t, ethtoolMsgNames[id], f[1], "name of op %d", id)
			fi.ops = append(fi.ops, famOp{uint32(id), uint32(fl)})
		default:
			t.Fatalf("%s: bad line %q", opsFile, sc.Text())
		}
	}
	return fi
}

// kernelRelease returns the running kernel's major and minor version.
func kernelRelease(t *testing.T) (int, int) {
	t.Helper()
	var u unix.Utsname
	require.NoError(t, unix.Uname(&u))
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	_, err := fmt.Sscanf(rel, "%d.%d", &major, &minor)
	require.NoError(t, err, "release %q", rel)
	return major, minor
}

// TestEthtoolOpList: manad's ethtool family advertises the op list of Linux
// 6.18 (recorded in testdata from the kernel's own nlctrl answer) in its
// order and with its flags (GENL_CMD_CAP_DO/DUMP/HASPOL, GENL_UNS_ADMIN_PERM),
// and the "monitor" group. On a 6.18 kernel the recording is checked against
// the live answer (and rewritten with -update-ops); on a newer kernel every
// recorded op must still be there with the same flags.
func TestEthtoolOpList(t *testing.T) {
	major, minor := kernelRelease(t)
	if *updateOps {
		require.True(t, major == 6 && minor == 18, "-update-ops needs a 6.18 kernel, this is %d.%d", major, minor)
		kc := dialKernel(t)
		kc.send(getFamilyReq("ethtool"))
		hdr := fmt.Sprintf("# CTRL_CMD_GETFAMILY \"ethtool\" of Linux %d.%d: op id, ETHTOOL_MSG_ name, CTRL_ATTR_OP_FLAGS;\n"+
			"# then the multicast groups. Rewrite on a 6.18 kernel with: go test -run TestEthtoolOpList ./genl/ -update-ops\n", major, minor)
		require.NoError(t, os.WriteFile(opsFile, []byte(hdr+formatOps(decodeFamily(t, kc.recv()[0]))), 0o644))
	}
	want := readOps(t)
	require.Len(t, want.ops, 50, "the 6.18 ethtool family has 50 ops")

	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	rc.send(getFamilyReq("ethtool"))
	got := decodeFamily(t, rc.recv()[0])
	assert.Equal(t, formatOps(want), formatOps(got), "manad's ethtool ops (-6.18 +manad)")

	if major < 6 || major == 6 && minor < 18 {
		t.Logf("kernel %d.%d is older than 6.18: compared with the recording only", major, minor)
		return
	}
	kc := dialKernel(t)
	kc.send(getFamilyReq("ethtool"))
	kern := decodeFamily(t, kc.recv()[0])
	if major == 6 && minor == 18 {
		assert.Equal(t, formatOps(want), formatOps(kern), "recorded ops (-recorded +kernel)")
		return
	}
	kflags := map[uint32]uint32{}
	for _, o := range kern.ops {
		kflags[o.id] = o.flags
	}
	for _, o := range want.ops {
		fl, ok := kflags[o.id]
		assert.True(t, ok && fl == o.flags, "op %d: 6.18 flags %#x, kernel %d.%d %#x (present %v)", o.id, o.flags, major, minor, fl, ok)
	}
}
