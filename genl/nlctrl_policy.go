package genl

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// CTRL_CMD_GETPOLICY (net/netlink/genetlink.c ctrl_dumppolicy*): the
// policies of a family's ops in the format of net/netlink/policy.c, so that
// ethtool, YNL and `genl-ctrl-list` can introspect manad's families as the
// kernel's.

var ctrlPolicyPolicy = nlattr.NewSet(unix.CTRL_ATTR_OP, map[uint16]nlattr.Policy{
	unix.CTRL_ATTR_FAMILY_ID:   {Kind: nlattr.U16},
	unix.CTRL_ATTR_FAMILY_NAME: {Kind: nlattr.NulString, Len: unix.GENL_NAMSIZ - 1},
	unix.CTRL_ATTR_OP:          {Kind: nlattr.U32},
})

// errNotDescribed drops the message of an attribute the dump does not describe.
var errNotDescribed = errors.New("attribute not described")

// policyDumpState is one GETPOLICY dump: the family, the ops it lists and
// the policies they use.
type policyDumpState struct {
	fam *family
	ops []*op
	pol nlattr.PolicyDump
}

// doPolicy and dumpPolicyOf are the policies of an op's do and dump halves
// (nil for a half the op does not have), as genl_get_cmd_both splits them.
func (o *op) doPolicy() *nlattr.Set {
	if o.doit == nil {
		return nil
	}
	return o.policy
}

func (o *op) dumpPolicyOf() *nlattr.Set {
	if o.dumpit == nil {
		return nil
	}
	if o.dumpPolicy != nil {
		return o.dumpPolicy
	}
	return o.policy
}

// ctrlPolicyStart mirrors ctrl_dumppolicy_start: the family by id (the id
// wins over the name), EINVAL when neither is given, ENOENT when it is not
// served or CTRL_ATTR_OP names no op, ENODATA when nothing has a policy.
func (s *Server) ctrlPolicyStart(r *request) error {
	id, name := r.attr(unix.CTRL_ATTR_FAMILY_ID), r.attr(unix.CTRL_ATTR_FAMILY_NAME)
	var fam *family
	switch {
	case id.Present():
		fam = s.families[id.U16()]
	case name.Present():
		fam = s.familyByName(name.Str())
	default:
		return unix.EINVAL
	}
	if fam == nil {
		return unix.ENOENT
	}
	st := &policyDumpState{fam: fam}
	if a := r.attr(unix.CTRL_ATTR_OP); a.Present() {
		var o *op
		if v := a.U32(); v <= 0xff {
			o = fam.op(uint8(v))
		}
		if o == nil {
			return nlattr.AttrError(unix.ENOENT, a, "")
		}
		st.ops = []*op{o}
	} else {
		for i := range fam.ops {
			st.ops = append(st.ops, &fam.ops[i])
		}
	}
	for _, o := range st.ops {
		st.pol.Add(o.doPolicy())
		st.pol.Add(o.dumpPolicyOf())
	}
	if st.pol.Len() == 0 {
		return unix.ENODATA
	}
	r.state = st
	return nil
}

// ctrlPolicyDump mirrors ctrl_dumppolicy: one message per op with a policy
// (CTRL_ATTR_OP_POLICY { cmd { CTRL_ATTR_POLICY_DO, _DUMP } }), then one per
// described attribute (CTRL_ATTR_POLICY { policy { attr { ... } } }), each
// starting with CTRL_ATTR_FAMILY_ID.
func (s *Server) ctrlPolicyDump(r *request, d *dumper) error {
	st := r.state.(*policyDumpState)
	for _, o := range st.ops {
		do, dump := o.doPolicy(), o.dumpPolicyOf()
		if do == nil && dump == nil {
			continue
		}
		if err := d.add(unix.CTRL_CMD_GETPOLICY, func(b *nlattr.Builder) error {
			b.PutU16(unix.CTRL_ATTR_FAMILY_ID, st.fam.id)
			pol := b.Nest(unix.CTRL_ATTR_OP_POLICY)
			// The kernel nests under doit->cmd, which genl_get_cmd_both zeroes
			// for a dump-only op (nlctrl's own GETPOLICY): so does manad.
			cmd := uint16(0)
			if o.doit != nil {
				cmd = uint16(o.cmd)
			}
			n := b.Nest(cmd)
			if do != nil {
				b.PutU32(unix.CTRL_ATTR_POLICY_DO, st.pol.Index(do))
			}
			if dump != nil {
				b.PutU32(unix.CTRL_ATTR_POLICY_DUMP, st.pol.Index(dump))
			}
			b.EndNest(n)
			b.EndNest(pol)
			return nil
		}); err != nil {
			return err
		}
	}
	for i := 0; i < st.pol.Len(); i++ {
		for t := 0; t <= int(st.pol.MaxType(i)); t++ {
			err := d.add(unix.CTRL_CMD_GETPOLICY, func(b *nlattr.Builder) error {
				b.PutU16(unix.CTRL_ATTR_FAMILY_ID, st.fam.id)
				n := b.Nest(unix.CTRL_ATTR_POLICY)
				if !st.pol.AppendAttr(b, i, uint16(t)) {
					return errNotDescribed // d.add drops the message
				}
				b.EndNest(n)
				return nil
			})
			if err != nil && err != errNotDescribed {
				return err
			}
		}
	}
	return nil
}
