package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/genl/wire"
)

// ShowLink is a top-level command (see topLevel).
func (t topLevel) ShowLink() *cobra.Command { return showLinkCmd(t.app) }

// showLinkCmd is plain `ethtool DEV`: link settings (LINKMODES, LINKINFO) and link state.
func showLinkCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show-link DEV",
		Short: "Show link settings and whether a link is detected (ethtool DEV)",
		Long: `Show the link settings (speed, duplex, auto-negotiation, port, link modes) and
whether a link is detected, as plain ethtool DEV (6.1) prints them. "manactl DEV"
is the same command. A manad port reports its configured speed (Unknown! without
one), full duplex, no auto-negotiation, port Other and no link modes, as the mana
driver does; its link is detected while the port is up with its queues attached.`,
		Example: `  manactl mana0
  manactl show-link mana0
  manactl --json mana0`,
		Args:              devArgs(0, 0),
		ValidArgsFunction: completeDevs(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ls *client.LinkSettings
			var st *client.LinkState
			err := a.ethtoolDo(cmd.Context(), func(c *client.Client) (err error) {
				ifi := client.Interface{Name: args[0]}
				if ls, err = c.LinkSettings(cmd.Context(), ifi); err != nil {
					return err
				}
				st, err = c.LinkState(cmd.Context(), ifi)
				return err
			})
			if err != nil {
				return err
			}
			dev := ifname(ls.Interface, args[0])
			if a.json {
				return failed(writeJSON(a.stdout, []linkJSON{linkToJSON(dev, ls, st)}))
			}
			writeLink(a.stdout, dev, ls, st)
			return nil
		},
	}
}

// Link modes that ethtool shows apart from the speed/duplex modes (netlink/settings.c).
var (
	linkPortModes = []struct{ mode, name string }{
		{"TP", "TP"}, {"AUI", "AUI"}, {"BNC", "BNC"}, {"MII", "MII"}, {"FIBRE", "FIBRE"}, {"Backplane", "Backplane"},
	}
	linkOtherModes = []string{"Autoneg", "Pause", "Asym_Pause"}
)

// linkModes splits a link-mode list as ethtool prints it: speed/duplex modes, FEC modes
// (without the FEC_ prefix), ports, autoneg and pause.
func linkModes(modes []string) (speeds, fec, ports []string, autoneg bool, pause string) {
	for _, m := range modes {
		switch {
		case strings.HasPrefix(m, "FEC_"):
			fec = append(fec, strings.TrimPrefix(m, "FEC_"))
		case slices.ContainsFunc(linkPortModes, func(p struct{ mode, name string }) bool { return p.mode == m }):
			ports = append(ports, m)
		case slices.Contains(linkOtherModes, m):
		default:
			speeds = append(speeds, m)
		}
	}
	autoneg = slices.Contains(modes, "Autoneg")
	sym, asym := slices.Contains(modes, "Pause"), slices.Contains(modes, "Asym_Pause")
	switch {
	case sym && asym:
		pause = "Symmetric Receive-only"
	case sym:
		pause = "Symmetric"
	case asym:
		pause = "Transmit-only"
	default:
		pause = "No"
	}
	return speeds, fec, ports, autoneg, pause
}

func notReported(l []string) string {
	if len(l) == 0 {
		return "Not reported"
	}
	return strings.Join(l, " ")
}

func yesNo(b bool) string {
	if b {
		return "Yes"
	}
	return "No"
}

// speedText is ethtool's "Speed:" value: Unknown! for 0 and SPEED_UNKNOWN.
func speedText(s uint32) string {
	if s == 0 || s == uint32(uint16(0xffff)) || s == wire.SpeedUnknown {
		return "Unknown!"
	}
	return fmt.Sprintf("%dMb/s", s)
}

func duplexText(d uint8) string {
	switch d {
	case wire.DuplexHalf:
		return "Half"
	case wire.DuplexFull:
		return "Full"
	}
	return fmt.Sprintf("Unknown! (%d)", d)
}

// portText is ethtool's names_port.
func portText(p uint8) string {
	switch p {
	case wire.PortTP:
		return "Twisted Pair"
	case 0x01:
		return "AUI"
	case 0x02:
		return "BNC"
	case 0x03:
		return "MII"
	case 0x04:
		return "FIBRE"
	case 0x05:
		return "Direct Attach Copper"
	case 0xef:
		return "None"
	case wire.PortOther:
		return "Other"
	}
	return fmt.Sprintf("Unknown! (%d)", p)
}

func transceiverText(t uint8) string {
	switch t {
	case 0:
		return "internal"
	case 1:
		return "external"
	}
	return "Unknown!"
}

// mdixText is ethtool's dump_mdix (ETH_TP_MDI_INVALID 0, MDI 1, MDI_X 2, MDI_AUTO 3).
func mdixText(mdix, ctrl uint8) string {
	s := "Unknown"
	switch mdix {
	case 1:
		s = "off"
	case 2:
		s = "on"
	}
	switch ctrl {
	case 3:
		s += " (auto)"
	case 1, 2:
		s += " (forced)"
	}
	return s
}

// writeLink prints link settings in the layout of plain `ethtool DEV` (6.1).
func writeLink(w io.Writer, dev string, ls *client.LinkSettings, st *client.LinkState) {
	sSpeeds, sFEC, sPorts, sAutoneg, sPause := linkModes(ls.Supported)
	aSpeeds, aFEC, _, aAutoneg, aPause := linkModes(ls.Advertised)
	fmt.Fprintf(w, "Settings for %s:\n", dev)
	fmt.Fprintf(w, "\tSupported ports: [ %s ]\n", strings.Join(sPorts, " "))
	fmt.Fprintf(w, "\tSupported link modes:   %s\n", notReported(sSpeeds))
	fmt.Fprintf(w, "\tSupported pause frame use: %s\n", sPause)
	fmt.Fprintf(w, "\tSupports auto-negotiation: %s\n", yesNo(sAutoneg))
	fmt.Fprintf(w, "\tSupported FEC modes: %s\n", notReported(sFEC))
	fmt.Fprintf(w, "\tAdvertised link modes:  %s\n", notReported(aSpeeds))
	fmt.Fprintf(w, "\tAdvertised pause frame use: %s\n", aPause)
	fmt.Fprintf(w, "\tAdvertised auto-negotiation: %s\n", yesNo(aAutoneg))
	fmt.Fprintf(w, "\tAdvertised FEC modes: %s\n", notReported(aFEC))
	if len(ls.Peer) > 0 {
		pSpeeds, pFEC, _, pAutoneg, pPause := linkModes(ls.Peer)
		fmt.Fprintf(w, "\tLink partner advertised link modes:  %s\n", notReported(pSpeeds))
		fmt.Fprintf(w, "\tLink partner advertised pause frame use: %s\n", pPause)
		fmt.Fprintf(w, "\tLink partner advertised auto-negotiation: %s\n", yesNo(pAutoneg))
		fmt.Fprintf(w, "\tLink partner advertised FEC modes: %s\n", notReported(pFEC))
	}
	fmt.Fprintf(w, "\tSpeed: %s\n", speedText(ls.Speed))
	if ls.Lanes != 0 {
		fmt.Fprintf(w, "\tLanes: %d\n", ls.Lanes)
	}
	fmt.Fprintf(w, "\tDuplex: %s\n", duplexText(ls.Duplex))
	fmt.Fprintf(w, "\tAuto-negotiation: %s\n", onOff(ls.Autoneg == wire.AutonegOn))
	fmt.Fprintf(w, "\tPort: %s\n", portText(ls.Port))
	fmt.Fprintf(w, "\tPHYAD: %d\n", ls.PhyAddr)
	fmt.Fprintf(w, "\tTransceiver: %s\n", transceiverText(ls.Transceiver))
	if ls.Port == wire.PortTP { // ethtool shows MDI-X for twisted pair only
		fmt.Fprintf(w, "\tMDI-X: %s\n", mdixText(ls.MDIX, ls.MDIXCtrl))
	}
	fmt.Fprintf(w, "\tLink detected: %s\n", strings.ToLower(yesNo(st.Link)))
}

// linkJSON is show-link; speed is null when unknown.
type linkJSON struct {
	IfName              string   `json:"ifname"`
	SupportedPorts      []string `json:"supported-ports"`
	SupportedLinkModes  []string `json:"supported-link-modes"`
	AdvertisedLinkModes []string `json:"advertised-link-modes"`
	PeerLinkModes       []string `json:"link-partner-advertised-link-modes,omitempty"`
	Speed               *uint32  `json:"speed"`
	Lanes               *uint32  `json:"lanes,omitempty"`
	Duplex              string   `json:"duplex"`
	AutoNegotiation     bool     `json:"auto-negotiation"`
	Port                string   `json:"port"`
	PHYAD               uint8    `json:"phyad"`
	Transceiver         string   `json:"transceiver"`
	LinkDetected        bool     `json:"link-detected"`
}

func linkToJSON(dev string, ls *client.LinkSettings, st *client.LinkState) linkJSON {
	_, _, ports, _, _ := linkModes(ls.Supported)
	out := linkJSON{IfName: dev, SupportedPorts: nonNil(ports), SupportedLinkModes: nonNil(ls.Supported),
		AdvertisedLinkModes: nonNil(ls.Advertised), PeerLinkModes: ls.Peer,
		Duplex: duplexText(ls.Duplex), AutoNegotiation: ls.Autoneg == wire.AutonegOn, Port: portText(ls.Port),
		PHYAD: ls.PhyAddr, Transceiver: transceiverText(ls.Transceiver), LinkDetected: st.Link}
	if speedText(ls.Speed) != "Unknown!" {
		out.Speed = &ls.Speed
	}
	if ls.Lanes != 0 {
		out.Lanes = &ls.Lanes
	}
	return out
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
