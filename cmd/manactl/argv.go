package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// ethtoolAnnotation is the cobra annotation of a command that ethtool users may call by an
// ethtool option (`manactl -g eth0`, `manactl --set-priv-flags eth0 full-page-rx on`): the
// options, space-separated, each the ethtool option (short or long) of the same command. The
// command declares them (ethtoolAlias), and ethtoolOptions and the manual read them there.
const ethtoolAnnotation = "ethtool"

// ethtoolAlias returns the annotations of a command that answers to the ethtool options opts.
func ethtoolAlias(opts ...string) map[string]string {
	return map[string]string{ethtoolAnnotation: strings.Join(opts, " ")}
}

// ethtoolAliases returns the ethtool options command c answers to (none when it is not a
// top-level command).
func ethtoolAliases(c *cobra.Command) []string {
	if c.Parent() != c.Root() {
		return nil
	}
	return strings.Fields(c.Annotations[ethtoolAnnotation])
}

// ethtoolOptions maps the ethtool options the commands of root declare to the commands' names.
// An option two commands declare is an error, which the tests find.
func ethtoolOptions(root *cobra.Command) (map[string]string, error) {
	m := map[string]string{}
	for _, c := range root.Commands() {
		for _, o := range ethtoolAliases(c) {
			if prev, ok := m[o]; ok {
				return nil, fmt.Errorf("ethtool option %s is declared by %s and %s", o, prev, c.Name())
			}
			m[o] = c.Name()
		}
	}
	return m, nil
}

// rewriteEthtoolArgs turns an ethtool-style invocation into manactl's command form before cobra
// parses it: the first argument that is not a global option, if it is one of opts (from
// ethtoolOptions), becomes the command name. Everything else is left alone, so the rewrite is a no-op for
// ordinary invocations. This is the only place where ethtool-style argv is handled.
func rewriteEthtoolArgs(opts map[string]string, args []string) []string {
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
		if cmd, ok := opts[a]; ok {
			out[i] = cmd
		}
		break
	}
	return out
}
