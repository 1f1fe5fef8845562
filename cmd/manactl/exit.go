package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit statuses manactl has of its own; a failed command exits with ethtool's status for the same
// failure (exitStatuses).
const (
	exitOK      = 0
	exitFailure = 1 // the request failed, where ethtool exits 1 too (netlink error, manad unreachable, ...)
	exitUsage   = 1 // the command line is wrong: ethtool.c exit_bad_args exits 1 too
)

// failure is the part of a command that failed, as far as ethtool's exit status tells parts apart.
type failure int

const (
	failRequest      failure = iota // the request: a netlink error, manad's answer, a local check
	failConnect                     // reaching manad or the kernel's ethtool netlink
	failStatsSocket                 // stats: the ioctl socket ("Cannot get control socket")
	failStatsStrings                // stats: ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS, or manad's STATS_GET
	failNoStats                     // stats: the driver has none ("no stats available")
	failStatsValues                 // stats: ETHTOOL_GSTATS ("Cannot get stats information")
)

// failurePart is implemented by the errors that know which part of a command failed; any other
// error is a failRequest.
type failurePart interface{ failurePart() failure }

// exitStatuses is the one table of manactl's exit statuses for failed commands: ethtool 6.x's for
// the same failure, from its source. ethtool's netlink commands return nlsock_send_get_request's
// or their own "nlctx->exit_code ?: N", which is N for a netlink error, whatever the errno (no
// such device, EPERM, an unknown flag name, an out-of-range value); ethtool -S is the ioctl path.
// A command or failure not listed (manad's own commands, a failed connect) exits exitFailure.
var exitStatuses = []struct {
	cmd     string
	failure failure
	status  int
	when    string // the failure, as the manual says it
	ethtool string // where ethtool returns the status
}{
	{"show-priv-flags", failRequest, 1, "the request fails", "netlink/privflags.c nl_gprivflags: nlsock_send_get_request, exit_code ?: 1"},
	{"set-priv-flags", failRequest, 1, "the request fails", "netlink/privflags.c nl_sprivflags: nlctx->exit_code ?: 1"},
	{"show-ring", failRequest, 1, "the request fails", "netlink/rings.c nl_gring: nlsock_send_get_request, exit_code ?: 1"},
	{"set-ring", failRequest, 81, "the request fails (no such device, EPERM, a refused value)", "netlink/rings.c nl_sring: nlctx->exit_code ?: 81"},
	{"show-coalesce", failRequest, 1, "the request fails", "netlink/coalesce.c nl_gcoalesce: nlsock_send_get_request, exit_code ?: 1"},
	{"set-coalesce", failRequest, 1, "the request fails", "netlink/coalesce.c nl_scoalesce: nlctx->exit_code ?: 1"},
	{"show-channels", failRequest, 1, "the request fails", "netlink/channels.c nl_gchannels: nlsock_send_get_request, exit_code ?: 1"},
	{"set-channels", failRequest, 1, "the request fails", "netlink/channels.c nl_schannels: nlctx->exit_code ?: 1"},
	{"stats", failStatsSocket, 70, "there is no control socket", `ethtool.c ioctl_init: "Cannot get control socket", 70`},
	{"stats", failStatsStrings, 96, "the statistics' names cannot be read (no such device, ...)", `ethtool.c do_gstats: "Cannot get stats strings information", 96`},
	// manad answers names and values in one reply: its failure is the names' failure.
	{"stats", failRequest, 96, "manad's statistics request fails", `ethtool.c do_gstats: "Cannot get stats strings information", 96`},
	{"stats", failNoStats, 94, "the device has no statistics", `ethtool.c do_gstats: "no stats available", 94`},
	{"stats", failStatsValues, 97, "the statistics' values cannot be read", `ethtool.c do_gstats: "Cannot get stats information", 97`},
	{"monitor", failRequest, 1, "the request fails", "netlink/monitor.c nl_monitor: 1"},
	{"show-link", failRequest, 75, "the link settings cannot be read", `netlink/settings.c nl_gset: "No data available", 75`},
	{"show-time-stamping", failRequest, 1, "the request fails", "netlink/tsinfo.c nl_tsinfo: nlsock_send_get_request, exit_code ?: 1"},
	{"show-rxfh", failRequest, 1, "the request fails", "netlink/rss.c nl_grss: nlsock_send_get_request, 1"},
	{"set-rxfh", failRequest, 1, "the request fails", "netlink/rss.c nl_srss: ret < 0 ? 1 : ret"},
	{"set-rxfh", failRxfhValue, 2, "the weights or the key do not fit the device", "ethtool.c fill_indir_table, convert_string_to_hashkey: 2"},
	{"show-features", failRequest, 1, "the request fails", "netlink/features.c nl_gfeatures: nlsock_send_get_request"},
	{"set-features", failRequest, 92, "the request fails", "netlink/features.c nl_sfeatures: nlctx->exit_code ?: 92"},
	{"set-features", failNoFeatureChange, 1, "no feature changed as asked", `ethtool.c do_sfeatures: "Could not change any device features", 1`},
}

// exitStatus is the exit status of command cmd (its path without "manactl ", e.g. "set-ring" or
// "port add") failing with err.
func exitStatus(cmd string, err error) int {
	f := failRequest
	var p failurePart
	if errors.As(err, &p) {
		f = p.failurePart()
	}
	for _, e := range exitStatuses {
		if e.cmd == cmd && e.failure == f {
			return e.status
		}
	}
	return exitFailure
}

// connectError is a failure to reach manad or the kernel; it reads as the error it wraps.
type connectError struct{ err error }

func (e *connectError) Error() string        { return e.err.Error() }
func (e *connectError) Unwrap() error        { return e.err }
func (e *connectError) failurePart() failure { return failConnect }

// writeExitStatuses writes the manual's EXIT STATUS section (markdown) from exitStatuses.
func writeExitStatuses(w io.Writer) {
	fmt.Fprintf(w, "%d on success; %d for a usage error (\"manactl: \\<problem\\>\" and a hint). A failed command "+
		"exits with ethtool's status for the same failure, %d unless listed:\n\n", exitOK, exitUsage, exitFailure)
	for _, e := range exitStatuses {
		if e.status != exitFailure {
			fmt.Fprintf(w, "- **%s**: %d when %s (ethtool: %s)\n", e.cmd, e.status, mdEscape(e.when),
				mdEscape(strings.SplitN(e.ethtool, ":", 2)[0]))
		}
	}
}
