package nlattr

// PolicyDump is the set of policies one CTRL_CMD_GETPOLICY dump describes
// (struct netlink_policy_dump_state): each Set gets an index in the order it
// was added, nested policies after the sets that refer to them. A Set is
// identified by its pointer, as the kernel identifies a policy array.
type PolicyDump struct {
	sets []*Set
}

// Add adds s and, recursively, every policy nested in it
// (netlink_policy_dump_add_policy). A nil s adds nothing.
func (d *PolicyDump) Add(s *Set) {
	if s == nil {
		return
	}
	d.add(s)
	// The walk covers sets appended while it runs, as the kernel's loop over
	// state->policies does.
	for i := 0; i < len(d.sets); i++ {
		for _, p := range d.sets[i].pol {
			if p.Kind == Nested && p.Nested != nil {
				d.add(p.Nested)
			}
		}
	}
}

func (d *PolicyDump) add(s *Set) {
	if d.index(s) < 0 {
		d.sets = append(d.sets, s)
	}
}

func (d *PolicyDump) index(s *Set) int {
	for i, v := range d.sets {
		if v == s {
			return i
		}
	}
	return -1
}

// Index returns the index of s (netlink_policy_dump_get_policy_idx); s must
// have been added (directly or nested), else Index returns 0 as the kernel's
// WARN path does.
func (d *PolicyDump) Index(s *Set) uint32 {
	return uint32(max(d.index(s), 0))
}

// Len is the number of policies in the dump.
func (d *PolicyDump) Len() int { return len(d.sets) }

// AppendAttr appends the description of attribute t of policy i as
// netlink_policy_dump_write does: nest i { nest t { NL_POLICY_TYPE_ATTR_* } }.
// It reports false, appending nothing, for attributes the kernel does not
// describe (no policy entry, NLA_REJECT) and for t out of range.
func (d *PolicyDump) AppendAttr(b *Builder, i int, t uint16) bool {
	if i < 0 || i >= len(d.sets) || t > d.sets[i].MaxType {
		return false
	}
	start := b.Nest(uint16(i))
	if !d.sets[i].pol[t].appendDump(b, t, d) {
		b.Truncate(start)
		return false
	}
	b.EndNest(start)
	return true
}

// MaxType is the highest attribute type of policy i (0 when out of range).
func (d *PolicyDump) MaxType(i int) uint16 {
	if i < 0 || i >= len(d.sets) {
		return 0
	}
	return d.sets[i].MaxType
}
