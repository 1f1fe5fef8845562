package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/ethtool"
)

// ShowFeatures is a top-level command (see topLevel).
func (t topLevel) ShowFeatures() *cobra.Command { return showFeaturesCmd(t.app) }

// showFeaturesCmd is ethtool -k.
func showFeaturesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-features DEV",
		Short: "Show the offloads and other features (ethtool -k)",
		Long: `Show the device's netdev features, as ethtool -k (6.1) prints them: the legacy
offload names first with the features they group, then the others. A manad
port's offloads are its TAP's and switch together.`,
		Example: `  manactl -k mana0
  manactl --json show-features mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-k", "--show-features", "--show-offload"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var f *client.Features
			var names []string
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				if names, err = c.StringSet(cmd.Context(), client.Interface{}, ethtool.SSFeatures); err != nil {
					return err
				}
				f, err = c.Features(cmd.Context(), client.Interface{Name: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(f.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []featuresJSON{featuresToJSON(dev, names, f)}))
			}
			writeFeatures(a.stdout, dev, names, f)
			return nil
		},
	}
}

// offFlag is one of ethtool's legacy offload flags (off_flag_def in ethtool's common.c): its
// long name and the pattern of the kernel features it stands for.
type offFlag struct{ short, long, pattern string }

var offFlags = []offFlag{
	{"rx", "rx-checksumming", "rx-checksum"}, {"tx", "tx-checksumming", "tx-checksum-*"},
	{"sg", "scatter-gather", "tx-scatter-gather*"}, {"tso", "tcp-segmentation-offload", "tx-tcp*-segmentation"},
	{"ufo", "udp-fragmentation-offload", "tx-udp-fragmentation"},
	{"gso", "generic-segmentation-offload", "tx-generic-segmentation"},
	{"gro", "generic-receive-offload", "rx-gro"}, {"lro", "large-receive-offload", "rx-lro"},
	{"rxvlan", "rx-vlan-offload", "rx-vlan-hw-parse"}, {"txvlan", "tx-vlan-offload", "tx-vlan-hw-insert"},
	{"ntuple", "ntuple-filters", "rx-ntuple-filter"}, {"rxhash", "receive-hashing", "rx-hashing"},
}

// patternMatch is ethtool's flag_pattern_match (at most one '*').
func patternMatch(name, pattern string) bool {
	pre, suf, ok := strings.Cut(pattern, "*")
	if !ok {
		return name == pattern
	}
	return len(name)+1 >= len(pattern) && strings.HasPrefix(name, pre) && strings.HasSuffix(name, suf)
}

// featureState is one feature as ethtool -k shows it.
func featureState(f *client.Features, name string) (on bool, suffix string) {
	on = slices.Contains(f.Active, name)
	wanted := slices.Contains(f.Wanted, name)
	switch {
	case !slices.Contains(f.HW, name) || slices.Contains(f.NoChange, name):
		suffix = " [fixed]"
	case on != wanted && wanted:
		suffix = " [requested on]"
	case on != wanted:
		suffix = " [requested off]"
	}
	return on, suffix
}

// writeFeatures prints features in ethtool -k's layout (6.1, netlink/features.c dump_features).
func writeFeatures(w io.Writer, dev string, names []string, f *client.Features) {
	fmt.Fprintf(w, "Features for %s:\n", dev)
	flagOf := make([]int, len(names))
	for i, n := range names {
		flagOf[i] = -1
		if n == "" {
			continue
		}
		for j, of := range offFlags {
			if patternMatch(n, of.pattern) {
				flagOf[i] = j
				break
			}
		}
	}
	feature := func(name, label, prefix string) {
		on, suffix := featureState(f, name)
		fmt.Fprintf(w, "%s%s: %s%s\n", prefix, label, onOff(on), suffix)
	}
	for j, of := range offFlags {
		if of.short == "ufo" { // no kernel with netlink ethtool supports UFO
			continue
		}
		match, value := 0, false
		for i := range names {
			if flagOf[i] == j {
				match++
				value = value || slices.Contains(f.Active, names[i])
			}
		}
		if match != 1 {
			fmt.Fprintf(w, "%s: %s\n", of.long, onOff(value))
		}
		for i, n := range names {
			if flagOf[i] != j {
				continue
			}
			if match == 1 {
				feature(n, of.long, "")
			} else {
				feature(n, n, "\t")
			}
		}
	}
	for i, n := range names {
		if n != "" && flagOf[i] < 0 {
			feature(n, n, "")
		}
	}
}

// featuresJSON is show-features (ethtool 6.1 has no JSON for -k): each feature with its
// state.
type featuresJSON struct {
	IfName   string                 `json:"ifname"`
	Features map[string]featureJSON `json:"features"`
}

type featureJSON struct {
	Active    bool `json:"active"`
	Requested bool `json:"requested"`
	Fixed     bool `json:"fixed"`
}

func featuresToJSON(dev string, names []string, f *client.Features) featuresJSON {
	out := featuresJSON{IfName: dev, Features: map[string]featureJSON{}}
	for _, n := range names {
		if n == "" {
			continue
		}
		on, suffix := featureState(f, n)
		out.Features[n] = featureJSON{Active: on, Requested: slices.Contains(f.Wanted, n), Fixed: suffix == " [fixed]"}
	}
	return out
}

// SetFeatures is a top-level command (see topLevel).
func (t topLevel) SetFeatures() *cobra.Command { return setFeaturesCmd(t.app) }

// setFeaturesCmd is ethtool -K.
func setFeaturesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set-features DEV FEATURE on|off...",
		Short: "Change offloads and other features (ethtool -K)",
		Long: `Change the device's features, as ethtool -K (6.1): a legacy name (tso,
tcp-segmentation-offload, gro, ...) stands for every kernel feature it groups,
any other name is a kernel feature name. What the device did otherwise than asked
is printed under "Actual changes:". On a manad port the offloads switch together:
turning tso off turns the TAP's offloads off (the kernel then hands over frames of
the MTU) without taking the port down. rx-udp-gro-forwarding and rx-gro-list are
the TAP's own kernel features, changed there alone; with either on, manad merges
a UDP flow's datagrams for the TAP too, where Linux's GRO would.`,
		Example: `  manactl -K mana0 tso off
  manactl --set-features mana0 gro on
  manactl -K mana0 rx-udp-gro-forwarding on`,
		Args:              devArgs(2, -1),
		ValidArgsFunction: completeDevs(a),
		Annotations:       ethtoolAlias("-K", "--features", "--offload"),
		RunE: func(cmd *cobra.Command, args []string) error {
			pairs := args[1:]
			if len(pairs)%2 != 0 {
				return usageErrorf("feature %q is not followed by 'on' or 'off'", pairs[len(pairs)-1])
			}
			for i := 1; i < len(pairs); i += 2 {
				if pairs[i] != "on" && pairs[i] != "off" {
					return usageErrorf("flag '%s' for parameter '%s' is not followed by 'on' or 'off'", pairs[i], pairs[i-1])
				}
			}
			var ch *client.FeaturesChange
			requested := map[string]bool{}
			var names []string
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				if names, err = c.StringSet(cmd.Context(), client.Interface{}, ethtool.SSFeatures); err != nil {
					return err
				}
				want := map[string]bool{}
				for i := 0; i < len(pairs); i += 2 {
					name, val := pairs[i], pairs[i+1]
					legacy := false
					for _, of := range offFlags {
						if name != of.short && name != of.long {
							continue
						}
						legacy = true
						for _, n := range names {
							if patternMatch(n, of.pattern) {
								want[n], requested[n] = val == "on", true
							}
						}
						break
					}
					if !legacy {
						want[name], requested[name] = val == "on", true
					}
				}
				ch, err = c.SetFeatures(cmd.Context(), client.Interface{Name: args[0]}, want)
				return err
			})
			if err != nil {
				return err
			}
			writeFeatureChanges(a.stdout, names, requested, ch)
			if len(ch.Active) == 0 && len(ch.Wanted) > 0 {
				return failed(&noFeatureChange{})
			}
			return nil
		},
	}
}

// writeFeatureChanges prints a FEATURES_SET reply as ethtool -K (6.1) does: nothing when all
// went as asked (only requested features changed, as requested), else every change.
func writeFeatureChanges(w io.Writer, names []string, requested map[string]bool, ch *client.FeaturesChange) {
	surprise := len(ch.Wanted) > 0
	for n := range ch.Active {
		surprise = surprise || !requested[n]
	}
	if !surprise {
		return
	}
	fmt.Fprintln(w, "Actual changes:")
	for _, n := range names {
		wv, inWanted := ch.Wanted[n]
		av, inActive := ch.Active[n]
		switch {
		case inWanted:
			fmt.Fprintf(w, "%s: %s [requested %s]\n", n, onOff(!wv), onOff(wv))
		case !inActive:
		case !requested[n]:
			fmt.Fprintf(w, "%s: %s [not requested]\n", n, onOff(av))
		default:
			fmt.Fprintf(w, "%s: %s\n", n, onOff(av))
		}
	}
}

// failNoFeatureChange is set-features changing nothing of what it asked (ethtool's do_sfeatures:
// "Could not change any device features", status 1).
const failNoFeatureChange failure = 100

type noFeatureChange struct{}

func (*noFeatureChange) Error() string        { return "Could not change any device features" }
func (*noFeatureChange) failurePart() failure { return failNoFeatureChange }
