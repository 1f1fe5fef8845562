// Package bytesize reads and writes byte sizes as manad's configuration file does
// (memory_budget: "2GiB", "512M", "1048576", "unlimited"), so that every layer that takes one
// (the file, manactl port add --memory-budget) takes the same text. It is a leaf: manactl links
// it without the configuration package.
package bytesize

import (
	"math"
	"strconv"
	"strings"
)

// Unlimited is the size "unlimited" reads as.
const Unlimited int64 = -1

// units are the suffixes a size may carry: binary multiples, with or without "iB" ("2G" =
// "2GiB" = 2·2³⁰ bytes, like page_size's "4K"), case-insensitive.
var units = []struct {
	suffix string
	shift  uint
}{
	{"TIB", 40}, {"GIB", 30}, {"MIB", 20}, {"KIB", 10},
	{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}, {"B", 0},
}

// Parse reads "unlimited" (Unlimited) or a positive whole number with an optional binary unit
// ("512MiB", "2G", "1048576"); ok is false for anything else, zero and overflow included.
func Parse(s string) (n int64, ok bool) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "UNLIMITED" {
		return Unlimited, true
	}
	var shift uint
	for _, u := range units {
		if rest, found := strings.CutSuffix(t, u.suffix); found {
			t, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 || v > math.MaxInt64>>shift {
		return 0, false
	}
	return v << shift, true
}

// Format writes b as the configuration file would: "unlimited", or bytes with the largest
// exact binary unit ("2GiB", "1536MiB", "1000"). Parse reads it back.
func Format(b int64) string {
	if b == Unlimited {
		return "unlimited"
	}
	for _, u := range units[:4] {
		if b > 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.suffix[:1] + "iB"
		}
	}
	return strconv.FormatInt(b, 10)
}
