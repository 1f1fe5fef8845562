package main

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/daemon/config/bytesize"
	"github.com/manad/manad/vnic/privflag"
	"github.com/manad/manad/vnic/rxbuf"
)

// Parsers for command arguments. Each returns a usage error (exit status 1) naming the argument.

// parseU32 parses an ethtool-style numeric parameter (decimal, or 0x hex as strtoul(…, 0)).
func parseU32(param, s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, usageErrorf("invalid value '%s' for parameter '%s'", s, param)
	}
	return uint32(v), nil
}

// parseOnOff parses on|off.
func parseOnOff(param, s string) (bool, error) {
	switch s {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, usageErrorf("invalid value '%s' for parameter '%s' (want on or off)", s, param)
}

// parseParams splits "NAME VALUE [NAME VALUE …]" into pairs, refusing unknown and repeated
// names (known lists the accepted names, in the order the help shows them).
func parseParams(what string, args []string, known []string) ([][2]string, error) {
	if len(args) == 0 {
		return nil, usageErrorf("no %s parameters given (want %s)", what, strings.Join(known, ", "))
	}
	if len(args)%2 != 0 {
		return nil, usageErrorf("%s parameter '%s' needs a value", what, args[len(args)-1])
	}
	seen := map[string]bool{}
	var out [][2]string
	for i := 0; i < len(args); i += 2 {
		name := args[i]
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		if !ok {
			return nil, usageErrorf("unknown %s parameter '%s' (want %s)", what, name, strings.Join(known, ", "))
		}
		if seen[name] {
			return nil, usageErrorf("%s parameter '%s' given twice", what, name)
		}
		seen[name] = true
		out = append(out, [2]string{name, args[i+1]})
	}
	return out, nil
}

// parsePageSize reads a page size with the configuration file's parser (rxbuf.ParsePageSize:
// 4096, 4K, 4KiB, …); the daemon, or rxbuf-plan's model, judges which sizes it supports.
func parsePageSize(s string) (uint32, error) {
	n, ok := rxbuf.ParsePageSize(s)
	if !ok {
		return 0, usageErrorf("invalid page size '%s' (want 4K, 16K or 64K, or 4096, 16384, 65536)", s)
	}
	return uint32(n), nil
}

// parseMemory reads a memory budget as the configuration file's memory_budget (bytesize.Parse:
// bytes, a number with a binary unit, or "unlimited", which PORT_NEW carries as all ones).
func parseMemory(param, s string) (uint64, error) {
	n, ok := bytesize.Parse(s)
	if !ok {
		return 0, usageErrorf("invalid value '%s' for %s (want bytes, or a number with K, M, G or T (KiB…TiB), or unlimited)", s, param)
	}
	return uint64(n), nil // Unlimited (-1) is all ones
}

// parseErrno accepts an errno number (1..4095) or name ("ENOMEM").
func parseErrno(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 10, 32); err == nil && v >= 1 && v <= 4095 {
		return uint32(v), nil
	}
	name := strings.ToUpper(s)
	for e := unix.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == name {
			return uint32(e), nil
		}
	}
	return 0, usageErrorf("invalid errno '%s' (want a name such as ENOMEM or a number 1..4095)", s)
}

// parsePrivFlags turns "full-page-rx[,…]" into the flag bits (privflag: the port's flags, as
// port add's --priv-flags names them).
func parsePrivFlags(s string) (uint32, error) {
	var bits uint32
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		b, ok := privflag.Bit(name)
		if !ok {
			return 0, usageErrorf("unknown private flag '%s' (want %s)", name, privflag.Want())
		}
		bits |= b
	}
	return bits, nil
}
