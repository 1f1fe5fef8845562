// Command ethtoolprobe is a client nobody on the project wrote the protocol of: it speaks the
// kernel's ethtool netlink through github.com/mdlayher/ethtool (and mdlayher/genetlink for
// RINGS_GET, which that package lacks), built statically (CGO_ENABLED=0), so its syscalls are Go's
// own and no LD_PRELOAD could reach them. tests/exec runs it with and without `manactl exec`.
//
//	ethtoolprobe show DEV           link info, link mode, link state, private flags, WoL, FEC
//	ethtoolprobe dump               the devices of a LINKINFO dump, one per line
//	ethtoolprobe set-priv DEV NAME on|off
//	ethtoolprobe bench N DEV        N PRIVFLAGS_GET and N RINGS_GET round trips: p50/p99 in ns
//	ethtoolprobe loop DEV SECONDS   PRIVFLAGS_GET until an error or the time is up ("looping"
//	                                once the first one is answered)
package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mdlayher/ethtool"
	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ethtoolprobe:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("no command")
	}
	c, err := ethtool.New()
	if err != nil {
		return fmt.Errorf("open ethtool netlink: %w", err)
	}
	defer c.Close()
	switch args[0] {
	case "show":
		return show(c, ethtool.Interface{Name: args[1]})
	case "dump":
		lis, err := c.LinkInfos()
		if err != nil {
			return fmt.Errorf("LinkInfos: %w", err)
		}
		names := make([]string, 0, len(lis))
		for _, li := range lis {
			names = append(names, fmt.Sprintf("%s port=%s", li.Interface.Name, li.Port))
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Println(n)
		}
		return nil
	case "set-priv":
		ifi := ethtool.Interface{Name: args[1]}
		return c.SetPrivateFlags(ethtool.PrivateFlags{Interface: ifi, Flags: map[string]bool{args[2]: args[3] == "on"}})
	case "bench":
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return err
		}
		return bench(c, n, args[2])
	case "loop":
		secs, err := strconv.Atoi(args[2])
		if err != nil {
			return err
		}
		end := time.Now().Add(time.Duration(secs) * time.Second)
		n := 0
		if _, err := c.PrivateFlags(ethtool.Interface{Name: args[1]}); err != nil {
			return fmt.Errorf("first PrivateFlags: %w", err)
		}
		fmt.Println("looping") // the socket is open and answers: the caller may act now
		for time.Now().Before(end) {
			if _, err := c.PrivateFlags(ethtool.Interface{Name: args[1]}); err != nil {
				fmt.Printf("ok %d\nerror: %v\n", n, err)
				return nil
			}
			n++
		}
		fmt.Printf("ok %d\n", n)
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

func show(c *ethtool.Client, ifi ethtool.Interface) error {
	if li, err := c.LinkInfo(ifi); err != nil {
		fmt.Printf("linkinfo: error: %v\n", err)
	} else {
		fmt.Printf("linkinfo: port=%s\n", li.Port)
	}
	if lm, err := c.LinkMode(ifi); err != nil {
		fmt.Printf("linkmode: error: %v\n", err)
	} else {
		fmt.Printf("linkmode: speed=%d duplex=%s autoneg=%s\n", lm.SpeedMegabits, lm.Duplex, lm.Autoneg)
	}
	if ls, err := c.LinkState(ifi); err != nil {
		fmt.Printf("linkstate: error: %v\n", err)
	} else {
		fmt.Printf("linkstate: link=%v\n", ls.Link)
	}
	if pf, err := c.PrivateFlags(ifi); err != nil {
		fmt.Printf("privflags: error: %v\n", err)
	} else {
		names := make([]string, 0, len(pf.Flags))
		for n, on := range pf.Flags {
			names = append(names, fmt.Sprintf("%s=%v", n, on))
		}
		sort.Strings(names)
		fmt.Printf("privflags: %v\n", names)
	}
	if _, err := c.WakeOnLAN(ifi); err != nil {
		fmt.Printf("wol: error: %v\n", err)
	} else {
		fmt.Println("wol: ok")
	}
	if _, err := c.FEC(ifi); err != nil {
		fmt.Printf("fec: error: %v\n", err)
	} else {
		fmt.Println("fec: ok")
	}
	return nil
}

// bench times PRIVFLAGS_GET (mdlayher/ethtool) and RINGS_GET (a raw genetlink request, as a
// program without an ethtool library sends it) for dev.
func bench(c *ethtool.Client, n int, dev string) error {
	ifi := ethtool.Interface{Name: dev}
	pf := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		_, err := c.PrivateFlags(ifi)
		pf = append(pf, time.Since(t0))
		if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("PRIVFLAGS_GET: %w", err)
		}
	}
	gc, err := genetlink.Dial(nil)
	if err != nil {
		return err
	}
	defer gc.Close()
	fam, err := gc.GetFamily(unix.ETHTOOL_GENL_NAME)
	if err != nil {
		return err
	}
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.ETHTOOL_A_RINGS_HEADER, func(nae *netlink.AttributeEncoder) error {
		nae.String(unix.ETHTOOL_A_HEADER_DEV_NAME, dev)
		return nil
	})
	body, err := ae.Encode()
	if err != nil {
		return err
	}
	rg := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		_, err := gc.Execute(genetlink.Message{
			Header: genetlink.Header{Command: unix.ETHTOOL_MSG_RINGS_GET, Version: unix.ETHTOOL_GENL_VERSION},
			Data:   body,
		}, fam.ID, netlink.Request)
		rg = append(rg, time.Since(t0))
		if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("RINGS_GET: %w", err)
		}
	}
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{{"privflags", pf}, {"rings", rg}} {
		slices.Sort(r.d)
		fmt.Printf("%s p50=%d p99=%d\n", r.name, r.d[len(r.d)/2].Nanoseconds(), r.d[len(r.d)*99/100].Nanoseconds())
	}
	return nil
}
