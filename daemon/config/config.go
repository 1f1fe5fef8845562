package config

import (
	"cmp"
	_ "embed"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manad/manad/genl/admission"
	"github.com/manad/manad/genl/busypoll"
)

// Defaults of the [daemon] table.
const (
	DefaultSocket     = "/run/manad/manad.sock"
	DefaultSocketMode = fs.FileMode(0o666)
	DefaultStateDir   = "/var/lib/manad"
	DefaultLogLevel   = slog.LevelInfo
	DefaultLogFormat  = "text"
	// NoAdminGroup is DaemonConfig.AdminGID when only uid 0 may change ports.
	NoAdminGroup = -1
	// maxSocketPath is what fits in sockaddr_un.sun_path with its terminating NUL.
	maxSocketPath = 107
)

// Config is a parsed configuration file: the daemon's settings and its ports, in file order.
type Config struct {
	// File is the name the configuration was parsed under (the path given to Load, or
	// DefaultName); errors and logs use it.
	File     string
	Daemon   DaemonConfig
	Ports    []PortSpec
	Segments []SegmentSpec // the [[segment]] tables, in file order
}

// DaemonConfig is the [daemon] table. cmd/manad overrides Socket, StateDir and LogLevel from its
// flags by assigning the fields (ParseLogLevel parses the flag), then calls Validate.
type DaemonConfig struct {
	Socket     string      // path of the Unix SOCK_SEQPACKET socket manactl connects to
	SocketMode fs.FileMode // permission bits of the socket file (who may connect)
	// AdminGroup is the admin_group as written ("" when none); AdminGID is its gid, or
	// NoAdminGroup. Members of the group may send SET requests as well as uid 0.
	AdminGroup string
	AdminGID   int
	StateDir   string     // directory of state.json
	LogLevel   slog.Level // one of slog.LevelDebug, LevelInfo, LevelWarn, LevelError
	LogFormat  string     // "text" or "json" (slog.TextHandler / slog.JSONHandler)
	// MetricsListen is the TCP host:port of the Prometheus /metrics endpoint; "" (the default)
	// serves none.
	MetricsListen string

	// Connection limits of the control socket (genl/transport.Config MaxConns, MaxConnsPerUID,
	// IdleTimeout): max_connections, max_connections_per_uid, idle_timeout.
	MaxConnections       int
	MaxConnectionsPerUID int
	IdleTimeout          time.Duration
	// BusyPoll is how long a connection's request loop polls for the next request after an
	// answer (genl/transport.Config.BusyPoll): busy_poll, 0 (off) to maxBusyPoll.
	BusyPoll time.Duration
	// MaxPollers bounds how many port queues may busy-poll at once (datapath.Pollers.SetMax,
	// the CPU the ports' NAPI settings may take): max_pollers, 0 to the CPUs manad may use but
	// one. DefaultMaxPollers (-1) leaves datapath's default (datapath.DefaultMaxPollers: one
	// where there are two CPUs or more, none on one).
	MaxPollers int
}

// DefaultMaxPollers is MaxPollers when the file sets none: the data path's own default.
const DefaultMaxPollers = -1

// maxPollersAllowed is the most pollers the processors allow, as datapath.Pollers.SetMax
// bounds them: the CPUs manad may use but one (none on a single CPU).
func maxPollersAllowed() int { return max(0, min(runtime.NumCPU(), runtime.GOMAXPROCS(0))-1) }

// checkMaxPollers returns what is wrong with max_pollers n, or "".
func checkMaxPollers(n int) string {
	if n == DefaultMaxPollers {
		return ""
	}
	if n < 0 || n > maxPollersAllowed() {
		return fmt.Sprintf("max_pollers %d out of range 0..%d (the CPUs manad may use, %d, but one)",
			n, maxPollersAllowed(), min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	}
	return ""
}

// Bounds of the connection limits.
const (
	maxConnectionsLimit = 65536
	minIdleTimeout      = time.Second
	maxIdleTimeout      = 24 * time.Hour
	// maxBusyPoll bounds busy_poll: a poll longer than a scheduler tick (1-4 ms) spins
	// through the time a client would have been woken anyway.
	maxBusyPoll = time.Millisecond
)

// DefaultDaemonConfig returns the [daemon] table's defaults.
func DefaultDaemonConfig() DaemonConfig {
	return DaemonConfig{
		Socket: DefaultSocket, SocketMode: DefaultSocketMode, AdminGID: NoAdminGroup,
		StateDir: DefaultStateDir, LogLevel: DefaultLogLevel, LogFormat: DefaultLogFormat,
		MaxConnections: admission.DefaultMaxConns, MaxConnectionsPerUID: admission.DefaultMaxConnsPerUID,
		IdleTimeout: admission.DefaultIdleTimeout, BusyPoll: busypoll.DefaultServerWindow, MaxPollers: DefaultMaxPollers,
	}
}

// Validate checks the fields the way Parse checks the [daemon] table; cmd/manad calls it after
// applying its flags. Errors: EINVAL with a message naming the field.
func (dc *DaemonConfig) Validate() error {
	msg := cmp.Or(checkSocket(dc.Socket), checkStateDir(dc.StateDir), checkMetricsListen(dc.MetricsListen))
	switch {
	case msg != "":
	case dc.SocketMode&^fs.ModePerm != 0:
		msg = fmt.Sprintf("socket_mode %#o is not permission bits", uint32(dc.SocketMode))
	case dc.AdminGID < NoAdminGroup || int64(dc.AdminGID) > math.MaxUint32-1:
		msg = fmt.Sprintf("admin_group gid %d invalid", dc.AdminGID)
	case dc.LogLevel != slog.LevelDebug && dc.LogLevel != slog.LevelInfo && dc.LogLevel != slog.LevelWarn && dc.LogLevel != slog.LevelError:
		msg = fmt.Sprintf("log_level %v unknown (want debug, info, warn or error)", dc.LogLevel)
	case dc.LogFormat != "text" && dc.LogFormat != "json":
		msg = fmt.Sprintf("log_format %q unknown (want text or json)", dc.LogFormat)
	default:
		msg = cmp.Or(checkConnections("max_connections", dc.MaxConnections),
			checkConnections("max_connections_per_uid", dc.MaxConnectionsPerUID), checkIdleTimeout(dc.IdleTimeout), checkBusyPoll(dc.BusyPoll),
			checkMaxPollers(dc.MaxPollers))
	}
	if msg != "" {
		return invalid("daemon: %s", msg)
	}
	return nil
}

func checkSocket(s string) string {
	switch {
	case !filepath.IsAbs(s):
		return fmt.Sprintf("socket %q must be an absolute path", s)
	case len(s) > maxSocketPath:
		return fmt.Sprintf("socket path is %d bytes; a Unix socket path holds at most %d", len(s), maxSocketPath)
	}
	return ""
}

func checkStateDir(s string) string {
	if !filepath.IsAbs(s) {
		return fmt.Sprintf("state_dir %q must be an absolute path", s)
	}
	return ""
}

// checkMetricsListen accepts "" (no endpoint) or a host:port with a numeric port; the host is
// not resolved here (binding it is the daemon's startup error).
func checkMetricsListen(s string) string {
	if s == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Sprintf("metrics_listen %q is not host:port with a numeric port (e.g. \"127.0.0.1:9469\")", s)
	}
	return ""
}

// Port returns the port named name and whether there is one.
func (c *Config) Port(name string) (PortSpec, bool) {
	i := slices.IndexFunc(c.Ports, func(p PortSpec) bool { return p.Name == name })
	if i < 0 {
		return PortSpec{}, false
	}
	return c.Ports[i].clone(), true
}

// Load reads and parses the configuration file at path; errors name it as given.
//
// Errors: the os error (errors.Is with fs.ErrNotExist / unix.ENOENT, unix.EACCES, …) when the
// file cannot be read; otherwise what Parse returns.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, data)
}

//go:embed default.toml
var defaultTOML []byte

// DefaultName is Config.File of the embedded default configuration.
const DefaultName = "default.toml"

// Default returns the embedded default configuration (default.toml): two ports, mana0 in netns
// manaA and mana1 in netns manaB, on segment wire0. It panics if the embedded file does not
// parse, which is a build defect that the package's tests catch.
func Default() *Config {
	c, err := Parse(DefaultName, defaultTOML)
	if err != nil {
		panic("config: embedded default.toml is invalid: " + err.Error())
	}
	return c
}

// DefaultTOML returns the text of the embedded default configuration, for printing as a starting
// point ("manad --print-config", say).
func DefaultTOML() []byte { return slices.Clone(defaultTOML) }

// ParseLogLevel parses a log level as the file and cmd/manad's flag spell it: debug, info, warn
// (or warning) or error, in any case. Errors: EINVAL, naming the allowed values.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, invalid("unknown log level %q (want debug, info, warn or error)", s)
}

// checkConnections returns what is wrong with connection limit n of key, or "".
func checkConnections(key string, n int) string {
	if n < 1 || n > maxConnectionsLimit {
		return fmt.Sprintf("%s %d out of range (1..%d)", key, n, maxConnectionsLimit)
	}
	return ""
}

// checkBusyPoll returns what is wrong with busy_poll d, or "".
func checkBusyPoll(d time.Duration) string {
	if d < 0 || d > maxBusyPoll {
		return fmt.Sprintf("busy_poll %v out of range (0..%v)", d, maxBusyPoll)
	}
	return ""
}

// checkIdleTimeout returns what is wrong with idle_timeout d, or "".
func checkIdleTimeout(d time.Duration) string {
	if d < minIdleTimeout || d > maxIdleTimeout {
		return fmt.Sprintf("idle_timeout %v out of range (%v..%v)", d, minIdleTimeout, maxIdleTimeout)
	}
	return ""
}
