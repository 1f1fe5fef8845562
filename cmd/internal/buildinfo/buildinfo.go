// Package buildinfo is the --version text of manad and manactl, from the build information the
// Go toolchain embeds in the binary (runtime/debug.ReadBuildInfo): the module version, the VCS
// revision, its time and whether the tree was modified, and the Go version.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
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
