package main

import "strings"

// ethtoolOptions maps the ethtool options manactl accepts as aliases to its own commands, so
// that `manactl -g eth0` and `manactl --set-priv-flags eth0 full-page-rx on` work for people who
// type ethtool. The short options are ethtool's (-g, -G, -l, -L, -S); each long option is the
// ethtool long option of the same command.
var ethtoolOptions = map[string]string{
	"--show-priv-flags":    "show-priv-flags",
	"--set-priv-flags":     "set-priv-flags",
	"-g":                   "show-ring",
	"--show-ring":          "show-ring",
	"-G":                   "set-ring",
	"--set-ring":           "set-ring",
	"-c":                   "show-coalesce",
	"--show-coalesce":      "show-coalesce",
	"-C":                   "set-coalesce",
	"--coalesce":           "set-coalesce",
	"-l":                   "show-channels",
	"--show-channels":      "show-channels",
	"-L":                   "set-channels",
	"--set-channels":       "set-channels",
	"-S":                   "stats",
	"--statistics":         "stats",
	"--monitor":            "monitor",
	"-T":                   "show-time-stamping",
	"-k":                   "show-features",
	"-K":                   "set-features",
	"--show-features":      "show-features",
	"--show-offload":       "show-features",
	"--features":           "set-features",
	"--offload":            "set-features",
	"--show-time-stamping": "show-time-stamping",
	"-x":                   "show-rxfh",
	"--show-rxfh-indir":    "show-rxfh",
	"--show-rxfh":          "show-rxfh",
	"-X":                   "set-rxfh",
	"--set-rxfh-indir":     "set-rxfh",
	"--rxfh":               "set-rxfh",
	"--set-rxfh":           "set-rxfh", // manactl's own, the counterpart of --show-rxfh
}

// rewriteEthtoolArgs turns an ethtool-style invocation into manactl's command form before cobra
// parses it: the first argument that is not a global option, if it is one of ethtoolOptions,
// becomes the command name. Everything else is left alone, so the rewrite is a no-op for
// ordinary invocations. This is the only place where ethtool-style argv is handled.
func rewriteEthtoolArgs(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i < len(out); i++ {
		a := out[i]
		switch {
		case a == "--socket":
			i++ // skip its value
			continue
		case a == "--json" || a == "--kernel" || strings.HasPrefix(a, "--socket="):
			continue
		}
		if cmd, ok := ethtoolOptions[a]; ok {
			out[i] = cmd
		}
		break
	}
	return out
}
