// Package privflag declares, once, a port's private flags (ethtool --show-priv-flags, the
// ETH_SS_PRIV_FLAGS string set): each flag's bit and name, as mana_ethtool.c's mana_priv_flags
// and MANA_PRIV_FLAG_*. vnic checks and applies them; the configuration, the state file, the
// daemon's replies and manactl's port add --priv-flags read and write them by name with Parse
// and NamesOf; none keeps a list of its own. It imports nothing of the project but genl/nlerr,
// so manactl links it without the port model.
//
// Adding a flag: its bit constant, its name in Names (in bit order) and Max one higher; vnic's
// layout decides what it does.
package privflag

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlerr"
)

// The private flags' bits.
const (
	// FullPageRx is MANA_PRIV_FLAG_USE_FULL_PAGE_RXBUF: one RX buffer per page instead of
	// page-pool fragments.
	FullPageRx uint32 = 1 << 0

	// Max is MANA_PRIV_FLAG_MAX, the number of private flags.
	Max = 1
	// Mask covers every defined flag (GENMASK(MANA_PRIV_FLAG_MAX - 1, 0)).
	Mask uint32 = 1<<Max - 1
)

// Names are the ETH_SS_PRIV_FLAGS strings, index i naming bit i (mana_priv_flags).
var Names = [Max]string{"full-page-rx"}

// Bit returns the bit of the flag named name; false when no flag has that name.
func Bit(name string) (uint32, bool) {
	for i, n := range Names {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// Parse turns flag names into their bits. Errors: EINVAL naming the first unknown name and
// listing the known ones ("unknown private flag \"turbo\" (want full-page-rx)").
func Parse(names []string) (uint32, error) {
	var f uint32
	for _, n := range names {
		b, ok := Bit(n)
		if !ok {
			return 0, nlerr.New(unix.EINVAL, "unknown private flag %q (want %s)", n, Want())
		}
		f |= b
	}
	return f, nil
}

// NamesOf returns the names of the flags set in f, in bit order (an empty, non-nil slice for
// none). Bits without a name (which Check refuses) are left out.
func NamesOf(f uint32) []string {
	names := []string{}
	for i, n := range Names {
		if f&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return names
}

// Check refuses bits past Max, as mana_set_priv_flags does. Errors: EINVAL "unknown private
// flag bits 0x…" naming them.
func Check(f uint32) error {
	if f&^Mask != 0 {
		return nlerr.New(unix.EINVAL, "unknown private flag bits %#x", f&^Mask)
	}
	return nil
}

// Want lists the flag names for a message: "a", "a or b", "a, b or c".
func Want() string {
	if len(Names) < 2 {
		return strings.Join(Names[:], "")
	}
	return fmt.Sprintf("%s or %s", strings.Join(Names[:len(Names)-1], ", "), Names[len(Names)-1])
}
