// Package buildinfo is the --version text of manad and manactl, from the build information the
// Go toolchain embeds in the binary (runtime/debug.ReadBuildInfo): the module version, the VCS
// revision, its time and whether the tree was modified, and the Go version.
package buildinfo

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Version is the --version text of program: its first line is "PROGRAM VERSION", then one line
// per VCS fact the build recorded, then the Go version and platform. A binary without build
// information (not built by the go command) says "(unknown)".
func Version(program string) string {
	bi, _ := debug.ReadBuildInfo() // nil when there is none
	return format(program, bi, runtime.GOOS+"/"+runtime.GOARCH)
}

// format is Version for build information bi (nil: none) and platform.
func format(program string, bi *debug.BuildInfo, platform string) string {
	var b strings.Builder
	if bi == nil {
		fmt.Fprintf(&b, "%s (unknown)\ngo:       %s %s\n", program, runtime.Version(), platform)
		return b.String()
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	fmt.Fprintf(&b, "%s %s\n", program, version)
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		fmt.Fprintf(&b, "revision: %s\n", rev)
	}
	if t := settings["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "time:     %s\n", t)
	}
	fmt.Fprintf(&b, "go:       %s %s\n", bi.GoVersion, platform)
	return b.String()
}

// Date is the date generated documents (the manual pages) carry: SOURCE_DATE_EPOCH's, for
// reproducible builds, else the VCS time of the build, else now.
func Date() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if t, err := time.Parse(time.RFC3339, s.Value); s.Key == "vcs.time" && err == nil {
				return t.UTC()
			}
		}
	}
	return time.Now().UTC()
}
