package daemon

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsExposure: an address beyond loopback is said to be reachable from beyond the host;
// loopback addresses, IPv4 and IPv6, are not.
func TestMetricsExposure(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want string // "" for none
	}{
		{"127.0.0.1", ""},
		{"127.0.0.53", ""},
		{"::1", ""},
		{"0.0.0.0", "all interfaces"},
		{"::", "all interfaces"},
		{"192.0.2.7", "address 192.0.2.7"},
		{"2001:db8::1", "address 2001:db8::1"},
	} {
		got := metricsExposure(&net.TCPAddr{IP: net.ParseIP(tc.ip), Port: 9469})
		assert.Equal(t, tc.want == "", got == "", "metricsExposure(%s) = %q, want %q", tc.ip, got, tc.want)
		assert.Contains(t, got, tc.want, "metricsExposure(%s) = %q, want %q", tc.ip, got, tc.want)
	}
	got := metricsExposure(&net.UnixAddr{Name: "/run/m.sock", Net: "unix"})
	assert.Equal(t, "", got, "metricsExposure(unix socket) = %q, want none", got)
}

// TestMetricsListenWarning: the daemon logs one warning at start when its metrics listen beyond
// loopback (":0" binds every interface), saying what is exposed and how to restrict it, and none
// on loopback.
func TestMetricsListenWarning(t *testing.T) {
	for _, tc := range []struct {
		listen string
		warn   bool
	}{
		{":0", true},
		{"0.0.0.0:0", true},
		{"127.0.0.1:0", false},
		{"[::1]:0", false},
		{"localhost:0", false},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			cfg := config.Default()
			cfg.Daemon.MetricsListen = tc.listen
			var buf lockedBuffer
			d, err := New(Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			require.NoError(t, err)
			stop, err := d.serveMetrics()
			if err != nil {
				testenv.SkipOrFail(t, "cannot listen on %s here: %v", tc.listen, err)
			}
			stop()
			log := buf.String()
			n := strings.Count(log, "metrics served beyond loopback")
			switch {
			case tc.warn && n != 1:
				t.Errorf("%d warnings, want one:\n%s", n, log)
			case !tc.warn && n != 0:
				t.Errorf("warning for a loopback address:\n%s", log)
			}
			if tc.warn {
				for _, want := range []string{"level=WARN", "all interfaces", "without authentication", `metrics_listen = \"127.0.0.1:PORT\"`} {
					assert.Contains(t, log, want, "the warning does not say")
				}
			}
		})
	}
}
