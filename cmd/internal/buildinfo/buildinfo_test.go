package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormat(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"tagged", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
			Settings: vcs("vcs", "git", "vcs.revision", "0123456789abcdef", "vcs.time", "2026-12-01T22:00:00Z", "vcs.modified", "false")},
			"manactl v1.2.3\nrevision: 0123456789abcdef\ntime:     2026-12-01T22:00:00Z\ngo:       go1.26.8 linux/amd64\n"},
		{"modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201220000-0123456789ab+dirty"},
			Settings: vcs("vcs.revision", "0123456789abcdef", "vcs.time", "2026-12-01T22:00:00Z", "vcs.modified", "true")},
			"manactl v0.0.0-20261201220000-0123456789ab+dirty\nrevision: 0123456789abcdef (modified)\ntime:     2026-12-01T22:00:00Z\ngo:       go1.26.8 linux/amd64\n"},
		{"no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"manactl (devel)\ngo:       go1.26.8 linux/amd64\n"},
		{"no version", &debug.BuildInfo{GoVersion: "go1.26.8"}, "manactl (devel)\ngo:       go1.26.8 linux/amd64\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, format("manactl", tc.bi, "linux/amd64"))
		})
	}
	got := format("manad", nil, "linux/amd64")
	assert.True(t, strings.HasPrefix(got, "manad (unknown)\ngo:       go"), "no build info: %q", got)
}

// TestVersion: a test binary has build information; its text names the program and Go.
func TestVersion(t *testing.T) {
	if got := Version("manad"); !strings.HasPrefix(got, "manad ") || !strings.Contains(got, "\ngo:       go") {
		t.Errorf("Version: %q", got)
	}
}

// TestDate: SOURCE_DATE_EPOCH fixes the documents' date, for reproducible builds.
func TestDate(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1764633600")
	got := Date()
	assert.True(t, got.Equal(time.Unix(1764633600, 0)), "Date %v", got)
}
