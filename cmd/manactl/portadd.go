package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/vnic/privflag"
)

// portAddFlags are port add's options, derived from wire.PortKeys: one per attribute PORT_NEW
// takes (the configuration's [[port]] keys, its port schema) but the name, which is the
// argument, each named as the key in kebab case, as the port's JSON shows it, and read as its
// row's wire.PortFlag says. The daemon checks the values with the file's rules.
type portAddFlags struct {
	s    wire.PortSpec
	text map[string]*string // the flags read after parsing (a MAC, sizes, durations, flag names)
	on   map[string]*bool   // wire.FlagDefaultOn flags, sent only when given
}

func (o *portAddFlags) register(f *pflag.FlagSet) {
	o.text, o.on = map[string]*string{}, map[string]*bool{}
	for i := range wire.PortKeys {
		k := &wire.PortKeys[i]
		switch k.Flag {
		case wire.FlagNone, wire.FlagArg:
		case wire.FlagString:
			f.StringVar(k.Spec(&o.s).(*string), k.Key, "", k.Help)
		case wire.FlagUint:
			f.Uint32Var(k.Spec(&o.s).(*uint32), k.Key, 0, k.Help)
		case wire.FlagBool:
			f.BoolVar(k.Spec(&o.s).(*bool), k.Key, false, k.Help)
		case wire.FlagDefaultOn:
			o.on[k.Key] = f.Bool(k.Key, true, k.Help)
		case wire.FlagPrivFlags:
			o.text[k.Key] = f.String(k.Key, "", k.Help+": "+strings.Join(privflag.Names[:], ", "))
		default:
			o.text[k.Key] = f.String(k.Key, "", k.Help)
		}
	}
}

// request returns the PORT_NEW request for a port named name; f tells which flags were given.
// Errors: a usage error naming the flag whose value cannot be read.
func (o *portAddFlags) request(f *pflag.FlagSet, name string) (wire.PortSpec, error) {
	s := o.s
	s.Name = name
	for i := range wire.PortKeys {
		k := &wire.PortKeys[i]
		switch k.Flag {
		case wire.FlagNone, wire.FlagArg, wire.FlagString, wire.FlagUint, wire.FlagBool:
			// Not a flag, or pflag wrote it into o.s.
		case wire.FlagDefaultOn:
			if f.Changed(k.Key) {
				on := *o.on[k.Key]
				*k.Spec(&s).(**bool) = &on
			}
		default:
			if text := *o.text[k.Key]; text != "" {
				if err := readPortFlag(k, text, k.Spec(&s)); err != nil {
					return s, err
				}
			}
		}
	}
	return s, nil
}

// readPortFlag reads the text of k's flag into the request's field p, as k.Flag says.
// Errors: a usage error naming the flag (or the value, for a page size or a private flag).
func readPortFlag(k *wire.PortKey, text string, p any) error {
	var err error
	switch k.Flag {
	case wire.FlagMAC:
		mac, perr := net.ParseMAC(text)
		if perr != nil {
			return usageErrorf("invalid --%s '%s'", k.Key, text)
		}
		*p.(*net.HardwareAddr) = mac
	case wire.FlagPageSize:
		*p.(*uint32), err = parsePageSize(text)
	case wire.FlagPrivFlags:
		*p.(*uint32), err = parsePrivFlags(text)
	case wire.FlagBytes:
		*p.(*uint64), err = parseMemory("--"+k.Key, text)
	case wire.FlagDuration:
		var d time.Duration
		if d, err = parseNAPITimeout(k.Key, text); err == nil {
			*p.(*uint64) = uint64(d)
		}
	default:
		return fmt.Errorf("--%s: no reader for its kind %d", k.Key, k.Flag)
	}
	return err
}

func portAddCmd(a *app) *cobra.Command {
	var o portAddFlags
	cmd := &cobra.Command{
		Use:   "add NAME [options]",
		Short: "Create a port",
		Long: `Create a port and its TAP. Options not given take the daemon's defaults (MTU 1500,
max MTU 9000, page size 4K, 16 of 64 queues, rings 1024/256, segment "default",
2 GiB memory budget, not persistent, offloads on, link speed unknown, RX buffers
allocated as the rule chooses and recycled, the upstream rule, one packet per RX
CQE, no NAPI deferral). Each option is the configuration's [[port]] key of that
name (--offload=false is offload = false, --rx-cqe-frames is rx_cqe_frames, …),
checked by the same rules.`,
		Example: `  manactl port add mana2 --netns manaC --segment wire0 --queues 4 --priv-flags full-page-rx
  manactl --json port add mana3 --mtu 9000 --page-size 64K --rule pre-frag`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] == "" {
				return usageErrorf("port add needs one port name")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.request(cmd.Flags(), args[0])
			if err != nil {
				return err
			}
			return a.withManad(cmd, func(c *client.Client) error {
				p, err := c.CreatePort(cmd.Context(), s)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.stdout, []portJSON{portToJSON(*p)})
				}
				return nil
			})
		},
	}
	o.register(cmd.Flags())
	return cmd
}
