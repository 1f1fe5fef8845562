package genl_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/ethtool"
	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
)

// policyReq is a CTRL_CMD_GETPOLICY dump request for family name (and op, when op >= 0).
func policyReq(name string, op int) []byte {
	m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest|nlattr.FlagDump, 7, unix.CTRL_CMD_GETPOLICY, 1)
	m.PutString(unix.CTRL_ATTR_FAMILY_NAME, name)
	if op >= 0 {
		m.PutU32(unix.CTRL_ATTR_OP, uint32(op))
	}
	return m.done()
}

// policyDump is a decoded GETPOLICY dump: per op its do and dump policy
// indexes, per policy index its attributes' NL_POLICY_TYPE_ATTR_* values.
type policyDump struct {
	ops      map[uint16][2]int // -1: half absent
	policies map[uint16]map[uint16]map[uint16]uint64
}

func decodePolicyDump(t *testing.T, msgs []rawMsg) policyDump {
	t.Helper()
	d := policyDump{ops: map[uint16][2]int{}, policies: map[uint16]map[uint16]map[uint16]uint64{}}
	for _, m := range msgs {
		require.Equal(t, uint16(unix.GENL_ID_CTRL), m.h.Type, "unexpected message type %d cmd %d", m.h.Type, m.data[0])
		require.Equal(t, byte(unix.CTRL_CMD_GETPOLICY), m.data[0], "unexpected message type %d cmd %d", m.h.Type, m.data[0])
		it := nlattr.NewIter(m.data, 4, len(m.data)-4)
		for it.Next() {
			a := it.Attr()
			switch a.Type() {
			case unix.CTRL_ATTR_FAMILY_ID:
			case unix.CTRL_ATTR_OP_POLICY:
				ops := nlattr.NewIter(m.data, a.PayloadOff(), len(a.Data))
				for ops.Next() {
					o := ops.Attr()
					v := [2]int{-1, -1}
					in := nlattr.NewIter(m.data, o.PayloadOff(), len(o.Data))
					for in.Next() {
						v[in.Attr().Type()-unix.CTRL_ATTR_POLICY_DO] = int(in.Attr().U32())
					}
					d.ops[o.Type()] = v
				}
			case unix.CTRL_ATTR_POLICY:
				pi := nlattr.NewIter(m.data, a.PayloadOff(), len(a.Data))
				for pi.Next() {
					p := pi.Attr()
					if d.policies[p.Type()] == nil {
						d.policies[p.Type()] = map[uint16]map[uint16]uint64{}
					}
					ai := nlattr.NewIter(m.data, p.PayloadOff(), len(p.Data))
					for ai.Next() {
						x := ai.Attr()
						desc := map[uint16]uint64{}
						di := nlattr.NewIter(m.data, x.PayloadOff(), len(x.Data))
						for di.Next() {
							y := di.Attr()
							if len(y.Data) == 8 {
								desc[y.Type()] = y.U64()
							} else {
								desc[y.Type()] = uint64(y.U32())
							}
						}
						d.policies[p.Type()][x.Type()] = desc
					}
				}
			default:
				t.Fatalf("unexpected attribute %d", a.Type())
			}
		}
	}
	return d
}

// resolve renders policy idx as text with nested policies inlined, so that
// dumps numbering their policies differently compare equal.
func (d policyDump) resolve(idx uint16, depth int) string {
	if depth > 10 {
		return "<loop>"
	}
	var attrs []int
	for a := range d.policies[idx] {
		attrs = append(attrs, int(a))
	}
	sort.Ints(attrs)
	var b strings.Builder
	for _, a := range attrs {
		desc := d.policies[idx][uint16(a)]
		var keys []int
		for k := range desc {
			keys = append(keys, int(k))
		}
		sort.Ints(keys)
		fmt.Fprintf(&b, "%s%d:", strings.Repeat("  ", depth), a)
		for _, k := range keys {
			if k != unix.NL_POLICY_TYPE_ATTR_POLICY_IDX {
				fmt.Fprintf(&b, " %d=%d", k, desc[uint16(k)])
			}
		}
		b.WriteString("\n")
		if n, ok := desc[unix.NL_POLICY_TYPE_ATTR_POLICY_IDX]; ok {
			b.WriteString(d.resolve(uint16(n), depth+1))
		}
	}
	return b.String()
}

// opPolicies renders the do and dump policies of op cmd.
func (d policyDump) opPolicies(cmd uint16) [2]string {
	var out [2]string
	for i, idx := range d.ops[cmd] {
		if idx >= 0 {
			out[i] = d.resolve(uint16(idx), 0)
		}
	}
	return out
}

// TestGetPolicyMatchesKernel compares manad's CTRL_CMD_GETPOLICY dumps with
// the kernel's: nlctrl's own byte for byte, and each ethtool op manad
// serves with the kernel's description of the same op.
func TestGetPolicyMatchesKernel(t *testing.T) {
	kc, _ := kernelInNetNS(t)
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)

	t.Run("nlctrl", func(t *testing.T) {
		km, kend := dumpAll(t, kc.send, kc.recv, policyReq("nlctrl", -1))
		mm, mend := dumpAll(t, rc.send, rc.recv, policyReq("nlctrl", -1))
		if decodeDone(t, kend).errno != 0 || decodeDone(t, mend).errno != 0 {
			t.Fatalf("DONE kernel %v, manad %v", decodeDone(t, kend).errno, decodeDone(t, mend).errno)
		}
		var kb, mb [][]byte
		for _, m := range km {
			kb = append(kb, m.data)
		}
		for _, m := range mm {
			mb = append(mb, m.data)
		}
		assert.Empty(t, cmp.Diff(kb, mb), "nlctrl policy dump (-kernel +manad)")
	})

	// Ops whose manad policy is knowingly not the kernel's, and why.
	differ := map[string]map[uint16]string{
		ethtool.FamilyName: {
			unix.ETHTOOL_MSG_COALESCE_SET: "manad has ETHTOOL_A_COALESCE_RX_CQE_FRAMES/_NSECS (31, 32: the seed threads' mana CQE coalescing), newer than this kernel",
		},
		"netdev": {
			wire.NetdevCmdPagePoolGet: "manad describes NLA_UINT as binary of 4..8 bytes; the kernel's dump has no policy",
			wire.NetdevCmdDevGet:      "the kernel's dump has no policy (attributes ignored); manad's validates the do policy",
			0:                         "qstats-get (dump-only, listed under 0): manad describes NLA_UINT scope as binary of 4..8 bytes",
		},
	}
	for _, fam := range []string{ethtool.FamilyName, "netdev"} {
		t.Run(fam, func(t *testing.T) {
			km, kend := dumpAll(t, kc.send, kc.recv, policyReq(fam, -1))
			mm, mend := dumpAll(t, rc.send, rc.recv, policyReq(fam, -1))
			if decodeDone(t, kend).errno != 0 || decodeDone(t, mend).errno != 0 {
				t.Fatalf("DONE kernel %v, manad %v", decodeDone(t, kend).errno, decodeDone(t, mend).errno)
			}
			kd, md := decodePolicyDump(t, km), decodePolicyDump(t, mm)
			require.NotEmpty(t, md.ops, "manad lists no ethtool op policies")
			for cmd := range md.ops {
				if _, ok := kd.ops[cmd]; !ok {
					t.Logf("op %d: the kernel has no policy (op not built in)", cmd)
					continue
				}
				diff := cmp.Diff(kd.opPolicies(cmd), md.opPolicies(cmd))
				if why, ok := differ[fam][cmd]; ok {
					assert.NotEqual(t, "", diff, "op %d: listed as differing (%s) but equals the kernel's", cmd, why)
					continue
				}
				assert.Empty(t, diff, "op %d policy (-kernel +manad)", cmd)
			}
		})
	}

	t.Run("single op", func(t *testing.T) {
		km, _ := dumpAll(t, kc.send, kc.recv, policyReq(ethtool.FamilyName, unix.ETHTOOL_MSG_RINGS_GET))
		mm, _ := dumpAll(t, rc.send, rc.recv, policyReq(ethtool.FamilyName, unix.ETHTOOL_MSG_RINGS_GET))
		kd, md := decodePolicyDump(t, km), decodePolicyDump(t, mm)
		require.Len(t, md.ops, 1, "ops: kernel %v, manad %v", kd.ops, md.ops)
		require.Len(t, kd.ops, 1, "ops: kernel %v, manad %v", kd.ops, md.ops)
		assert.Empty(t, cmp.Diff(kd.opPolicies(unix.ETHTOOL_MSG_RINGS_GET), md.opPolicies(unix.ETHTOOL_MSG_RINGS_GET)), "RINGS_GET (-kernel +manad)")
	})

	t.Run("errors", func(t *testing.T) {
		noFam := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest|nlattr.FlagDump, 7, unix.CTRL_CMD_GETPOLICY, 1).done()
		for _, tc := range []struct {
			name string
			req  []byte
		}{
			{"no family", noFam},
			{"unknown family", policyReq("nosuchfamily", -1)},
			{"unknown op", policyReq(ethtool.FamilyName, 250)},
			{"op out of range", policyReq(ethtool.FamilyName, 0x1ff)},
		} {
			_, kend := dumpAll(t, kc.send, kc.recv, tc.req)
			_, mend := dumpAll(t, rc.send, rc.recv, tc.req)
			ka, ma := decodeAck(t, kend), decodeAck(t, mend)
			assert.Equal(t, ma.errno, ka.errno, "%s: kernel %v %q off %d, manad %v %q off %d", tc.name, ka.errno, ka.msg, ka.off, ma.errno, ma.msg, ma.off)
			assert.Equal(t, ma.msg, ka.msg, "%s: kernel %v %q off %d, manad %v %q off %d", tc.name, ka.errno, ka.msg, ka.off, ma.errno, ma.msg, ma.off)
			assert.Equal(t, ma.off, ka.off, "%s: kernel %v %q off %d, manad %v %q off %d", tc.name, ka.errno, ka.msg, ka.off, ma.errno, ma.msg, ma.off)
		}
	})
}

// TestGetPolicyEveryOp: every op of every family that advertises a policy
// (GENL_CMD_CAP_HASPOL) is described by GETPOLICY, alone and in the family's
// dump, and every policy index an op or a nest refers to is in the dump.
func TestGetPolicyEveryOp(t *testing.T) {
	ts := startServer(t, nil)
	rc := dialRaw(t, ts.path)
	for _, fam := range []string{"nlctrl", ethtool.FamilyName, "manad", "netdev"} {
		all, end := dumpAll(t, rc.send, rc.recv, policyReq(fam, -1))
		require.Equal(t, unix.Errno(0), decodeDone(t, end).errno, "%s: dump ended with", fam)
		d := decodePolicyDump(t, all)
		check := func(what string, d policyDump) {
			for cmd, idx := range d.ops {
				for _, i := range idx {
					if _, ok := d.policies[uint16(i)]; i >= 0 {
						assert.True(t, ok, "%s %s op %d: policy %d not described", fam, what, cmd, i)
					}
				}
			}
			for p, attrs := range d.policies {
				for a, desc := range attrs {
					if n, ok := desc[unix.NL_POLICY_TYPE_ATTR_POLICY_IDX]; ok {
						assert.NotNil(t, d.policies[uint16(n)], "%s %s policy %d attr %d: nested policy %d not described", fam, what, p, a, n)
					}
				}
			}
		}
		check("dump", d)
		rc.send(func() []byte {
			m := newMsg(unix.GENL_ID_CTRL, nlattr.FlagRequest, 1, unix.CTRL_CMD_GETFAMILY, 1)
			m.PutString(unix.CTRL_ATTR_FAMILY_NAME, fam)
			return m.done()
		}())
		fm := rc.recv()[0]
		var haspol []int
		it := nlattr.NewIter(fm.data, 4, len(fm.data)-4)
		for it.Next() {
			if it.Attr().Type() != unix.CTRL_ATTR_OPS {
				continue
			}
			ops := nlattr.NewIter(fm.data, it.Attr().PayloadOff(), len(it.Attr().Data))
			for ops.Next() {
				var id, flags uint32
				in := nlattr.NewIter(fm.data, ops.Attr().PayloadOff(), len(ops.Attr().Data))
				for in.Next() {
					switch in.Attr().Type() {
					case unix.CTRL_ATTR_OP_ID:
						id = in.Attr().U32()
					case unix.CTRL_ATTR_OP_FLAGS:
						flags = in.Attr().U32()
					}
				}
				if flags&unix.GENL_CMD_CAP_HASPOL != 0 {
					haspol = append(haspol, int(id))
				}
			}
		}
		assert.NotEmpty(t, haspol, "%s: no op advertises a policy", fam)
		for _, cmd := range haspol {
			msgs, end := dumpAll(t, rc.send, rc.recv, policyReq(fam, cmd))
			if e := decodeDone(t, end).errno; e != 0 {
				t.Errorf("%s op %d: GETPOLICY ended with %v", fam, cmd, e)
				continue
			}
			one := decodePolicyDump(t, msgs)
			assert.Len(t, one.ops, 1, "%s op %d: %d op entries, want 1", fam, cmd, len(one.ops))
			check(fmt.Sprintf("op %d", cmd), one)
			// A dump-only op is listed under 0, as the kernel's doit->cmd.
			_, ok := d.ops[uint16(cmd)]
			if _, dumpOnly := one.ops[0]; !ok {
				assert.True(t, dumpOnly && d.ops[0] != [2]int{}, "%s op %d: missing from the family dump", fam, cmd)
			}
		}
	}
}
