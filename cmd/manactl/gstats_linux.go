package main

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/wire"
	"github.com/manad/manad/internal/siocethtool"
)

// Kernel driver statistics for `stats --kernel`. The kernel's ethtool netlink has no request for
// the driver's ETH_SS_STATS counters (STATS_GET carries only the standard IEEE/RMON groups), so
// ethtool -S uses the SIOCETHTOOL ioctl, and so does manactl for devices manad does not own:
// ETHTOOL_GSSET_INFO for the count, ETHTOOL_GSTRINGS for the names, ETHTOOL_GSTATS for the values
// (ethtool.c: do_gstats, get_stringset).

// errnoError is an error printed perror-style, "what: Errno text" (as ethtool prints a failed
// ioctl: "Cannot get stats strings information: No such device"); it unwraps to the errno. It is
// how manactl prints a failure of its own (and which part of the command failed, for the exit
// status), not an error passed between layers: those are genl/nlerr's, which errorLine prints as
// ethtool prints a netlink error.
type errnoError struct {
	what  string
	errno unix.Errno
	part  failure // which part of the command failed (exitStatuses)
}

func (e *errnoError) failurePart() failure { return e.part }

func (e *errnoError) Error() string {
	if e.what == "" {
		return strerror(e.errno)
	}
	return e.what + ": " + strerror(e.errno)
}

func (e *errnoError) Unwrap() error { return e.errno }

// errNoStats is ethtool's "no stats available" for a driver without statistics.
type errNoStats struct{}

func (errNoStats) Error() string { return "no stats available" }
func (errNoStats) Unwrap() error { return unix.ENODATA }

func (errNoStats) failurePart() failure { return failNoStats }

// kernelStats returns dev's driver statistics from the kernel, in driver order. Errors are
// *errnoError, reading as ethtool's ("Cannot get stats strings information: No such device") and
// wrapping the errno, or errNoStats (ENODATA) for a driver that has none.
func kernelStats(dev string) ([]wire.Stat, error) {
	if len(dev) >= unix.IFNAMSIZ {
		return nil, &errnoError{"Cannot get stats strings information", unix.ENODEV, failStatsStrings}
	}
	// As ethtool: socket(AF_INET, SOCK_DGRAM), else AF_UNIX.
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		if fd, err = unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return nil, &errnoError{"Cannot get control socket", errnoOf(err), failStatsSocket}
		}
	}
	defer unix.Close(fd)

	n, err := siocethtool.SetLen(fd, dev, siocethtool.SSStats)
	if err != nil {
		return nil, &errnoError{"Cannot get stats strings information", errnoOf(err), failStatsStrings}
	}
	if n < 1 {
		return nil, errNoStats{}
	}
	names, err := siocethtool.Strings(fd, dev, siocethtool.SSStats, n)
	if err != nil {
		return nil, &errnoError{"Cannot get stats strings information", errnoOf(err), failStatsStrings}
	}
	vals, err := siocethtool.Stats(fd, dev, n)
	if err != nil {
		return nil, &errnoError{"Cannot get stats information", errnoOf(err), failStatsValues}
	}
	out := make([]wire.Stat, min(len(names), len(vals)))
	for i := range out {
		out[i] = wire.Stat{Name: names[i], Value: vals[i]}
	}
	return out, nil
}

// errnoOf is err's errno (EIO if it has none).
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}
