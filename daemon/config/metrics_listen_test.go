package config

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestMetricsListen: metrics_listen is off by default, takes a host:port, and says what is wrong
// with anything else, from the file (with its line) and from Validate (the --metrics-listen flag).
func TestMetricsListen(t *testing.T) {
	require.Equal(t, "", DefaultDaemonConfig().MetricsListen, "metrics endpoint on by default")
	for _, tc := range []struct {
		value, want string // want "" means accepted
	}{
		{"127.0.0.1:9469", ""},
		{"[::1]:0", ""},
		{":9469", ""},
		{"localhost:9469", ""},
		{"127.0.0.1", `metrics_listen "127.0.0.1" is not host:port with a numeric port (e.g. "127.0.0.1:9469")`},
		{"127.0.0.1:http", `metrics_listen "127.0.0.1:http" is not host:port with a numeric port (e.g. "127.0.0.1:9469")`},
		{"127.0.0.1:65536", `metrics_listen "127.0.0.1:65536" is not host:port with a numeric port (e.g. "127.0.0.1:9469")`},
	} {
		cfg, err := Parse("t.toml", []byte("[daemon]\nmetrics_listen = \""+tc.value+"\"\n"))
		switch {
		case tc.want == "" && (err != nil || cfg.Daemon.MetricsListen != tc.value):
			t.Errorf("%q: %v, %+v", tc.value, err, cfg)
		case tc.want != "" && (err == nil || err.Error() != "t.toml:2: daemon: "+tc.want):
			t.Errorf("%q: error %v, want t.toml:2: daemon: %s", tc.value, err, tc.want)
		}
		dc := DefaultDaemonConfig()
		dc.MetricsListen = tc.value
		err = dc.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate %q: %v", tc.value, err)
		case tc.want != "" && (err == nil || err.Error() != "daemon: "+tc.want+": invalid argument" || !errors.Is(err, unix.EINVAL)):
			t.Errorf("Validate %q: %v, want daemon: %s", tc.value, err, tc.want)
		}
	}
	if _, err := Parse("t.toml", []byte("[daemon]\nmetrics_listen = 9469\n")); err == nil || err.Error() != "t.toml:2: daemon: metrics_listen must be a string, not the integer 9469" {
		t.Errorf("integer: %v", err)
	}
}
