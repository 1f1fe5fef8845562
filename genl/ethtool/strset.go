package ethtool

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// StringSet is one decoded ETHTOOL_A_STRINGSETS_STRINGSET.
type StringSet struct {
	ID    uint32
	Count uint32
	// Strings is nil for a counts-only reply, else Count strings in index
	// order.
	Strings []string
}

// DecodeStringSets decodes the payload of ETHTOOL_A_STRSET_STRINGSETS as the
// kernel or manad sends it (strset_fill_reply). Every set needs ID and COUNT;
// STRINGS, when present, must hold indexes below COUNT. It never panics.
func DecodeStringSets(payload []byte) ([]StringSet, error) {
	var sets []StringSet
	it := nlattr.NewIter(payload, 0, len(payload))
	for it.Next() {
		if it.Attr().Type() != unix.ETHTOOL_A_STRINGSETS_STRINGSET {
			continue
		}
		ss, err := decodeStringSet(it.Attr().Data)
		if err != nil {
			return nil, err
		}
		sets = append(sets, ss)
	}
	if it.Rem() > 0 {
		return nil, fmt.Errorf("ethtool: malformed string sets")
	}
	return sets, nil
}

func decodeStringSet(b []byte) (StringSet, error) {
	var ss StringSet
	var haveID, haveCount bool
	var strs nlattr.Attr
	it := nlattr.NewIter(b, 0, len(b))
	for it.Next() {
		a := it.Attr()
		switch a.Type() {
		case unix.ETHTOOL_A_STRINGSET_ID:
			ss.ID, haveID = a.U32(), len(a.Data) == 4
		case unix.ETHTOOL_A_STRINGSET_COUNT:
			ss.Count, haveCount = a.U32(), len(a.Data) == 4
		case unix.ETHTOOL_A_STRINGSET_STRINGS:
			strs = a
			strs.Off = 1 // mark present; offsets are not used here
		}
	}
	if !haveID || !haveCount {
		return StringSet{}, fmt.Errorf("ethtool: string set without a u32 id and count")
	}
	if !strs.Present() {
		return ss, nil
	}
	if ss.Count > 1<<16 {
		return StringSet{}, fmt.Errorf("ethtool: string set %d: implausible count %d", ss.ID, ss.Count)
	}
	ss.Strings = make([]string, ss.Count)
	si := nlattr.NewIter(strs.Data, 0, len(strs.Data))
	for si.Next() {
		var idx uint32
		var val string
		var haveIdx bool
		vi := nlattr.NewIter(si.Attr().Data, 0, len(si.Attr().Data))
		for vi.Next() {
			a := vi.Attr()
			switch a.Type() {
			case unix.ETHTOOL_A_STRING_INDEX:
				idx, haveIdx = a.U32(), len(a.Data) == 4
			case unix.ETHTOOL_A_STRING_VALUE:
				val = a.Str()
			}
		}
		if !haveIdx || idx >= ss.Count {
			return StringSet{}, fmt.Errorf("ethtool: string set %d: bad string index", ss.ID)
		}
		ss.Strings[idx] = val
	}
	return ss, nil
}
