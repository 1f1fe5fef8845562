// Command manad hosts software Microsoft MANA NIC ports and serves them over an
// ethtool-compatible generic netlink family on a Unix socket. See `manad --help`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/cmd/internal/buildinfo"
	"github.com/manad/manad/daemon"
	"github.com/manad/manad/daemon/config"
	"github.com/manad/manad/genl/transport"
)

const usage = `NAME
    manad - software Microsoft MANA NIC daemon

SYNOPSIS
    manad [--config FILE] [--socket PATH] [--state-dir DIR] [--log-level LEVEL]
          [--log-format text|json] [--metrics-listen HOST:PORT] [--check-config]
          [--print-default-config]
    manad --version

DESCRIPTION
    manad hosts software MANA ports. Each port is a real Linux network device (a
    multi-queue TAP) that ip, ping, iperf and udev see, while manad plays the NIC and
    its driver: it moves frames between ports over virtual wire segments, lays out
    RX buffers as the upstream mana driver does (page-pool fragments or one buffer
    per page, headroom, XDP) and applies private-flag, MTU, XDP, ring and channel
    changes with the driver's pre-allocate, detach, attach, revert-or-reset
    semantics.

    Ports are controlled with manactl, ethtool-style, or any client of the kernel's
    ethtool generic netlink family pointed at manad's socket. The administrative
    state and MTU of a port follow its TAP: "ip link set DEV up|down|mtu N" works.

    Without --config, manad uses its embedded default configuration: two ports,
    mana0 (netns manaA) and mana1 (netns manaB), on one segment. Runtime changes
    are saved in STATE_DIR/state.json and restored at the next start; persistent
    TAPs keep their addresses across a restart. A change asked for over the socket
    is refused before it is applied when its state cannot be saved (a read-only or
    full state directory: the reply carries EROFS, ENOSPC, ... and says what to
    fix); a change made with ip link is applied, and its failed save logged,
    counted (manad_state_save_failures_total) and retried until it succeeds.
    state.json must be a regular file of at most 64 MiB.

    manad must run as root (it creates TAP devices and network namespaces and
    loads eBPF programs). It supports systemd socket activation (a SOCK_SEQPACKET
    socket) and Type=notify readiness.

    Anyone may connect to the socket; its limits are keys of the [daemon] table:
    max_connections (256; root is never refused and the last eighth is kept for
    root and admin_group), max_connections_per_uid (32 per non-root user) and
    idle_timeout ("5m": a connection that sends nothing and joined no group is
    closed). A refused connection gets EUSERS with a message. busy_poll ("200us",
    "0" for none) is how long a connection's request loop keeps polling for the
    next request after an answer, as the kernel's busy_read: a client in a request
    loop is answered without a wake-up, for up to that much CPU per request (never
    on one CPU, where the poll would hold off the client it waits for).

OPTIONS
    --config FILE           read the configuration from FILE (TOML) instead of the
                            embedded default
    --socket PATH           listen on PATH (default from the configuration,
                            /run/manad/manad.sock)
    --state-dir DIR         keep state.json in DIR (default /var/lib/manad)
    --log-level LEVEL       debug, info, warn or error (default info)
    --log-format FORMAT     text or json (default text)
    --metrics-listen ADDR   serve Prometheus metrics at http://ADDR/metrics
                            (host:port; port 0 picks a free port, logged as
                            "metrics listening"); default from the configuration
                            (metrics_listen), none. Without authentication: an
                            address beyond loopback (":PORT", 0.0.0.0) is warned
                            about at start
    --check-config          validate the configuration, print the ports and exit
    --print-default-config  print the embedded default configuration and exit
    --version               print the version (module version, VCS revision and
                            time, whether the tree was modified, Go version) and
                            exit
    -h, --help              show this help

SIGNALS
    SIGTERM, SIGINT  stop: queues stop, every RX buffer returns (checked and
                     logged), non-persistent TAPs are removed, state is saved.

EXIT STATUS
    0 on a clean stop, 1 on a runtime error, 2 on a usage or configuration error,
    a state file written by a newer manad, or a state file that is not a regular
    file of at most 64 MiB (a FIFO, a symbolic link, a directory; all left
    untouched).

EXAMPLES
    sudo manad
    sudo manad --config /etc/manad/manad.toml --log-level debug
    manad --config ./manad.toml --check-config

SEE ALSO
    manactl(8), manad.toml(5), ethtool(8), ip-link(8)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("manad", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "")
	socket := fs.String("socket", "", "")
	stateDir := fs.String("state-dir", "", "")
	logLevel := fs.String("log-level", "", "")
	logFormat := fs.String("log-format", "", "")
	metricsListen := fs.String("metrics-listen", "", "")
	check := fs.Bool("check-config", false, "")
	printDefault := fs.Bool("print-default-config", false, "")
	version := fs.Bool("version", false, "")
	printMan := fs.Bool("print-man", false, "") // manad(8) in roff, for make man; not in the usage
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "manad: %v\nTry 'manad --help'.\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "manad: unexpected argument %q\nTry 'manad --help'.\n", fs.Arg(0))
		return 2
	}
	if *printDefault {
		stdout.Write(config.DefaultTOML())
		return 0
	}
	if *version {
		fmt.Fprint(stdout, buildinfo.Version("manad"))
		return 0
	}
	if *printMan {
		fmt.Fprint(stdout, manPage(usage, buildinfo.Date()))
		return 0
	}

	cfg := config.Default()
	if *cfgPath != "" {
		var err error
		if cfg, err = config.Load(*cfgPath); err != nil {
			fmt.Fprintf(stderr, "manad: %v\n", err)
			return 2
		}
	}
	if *socket != "" {
		cfg.Daemon.Socket = *socket
	}
	if *stateDir != "" {
		cfg.Daemon.StateDir = *stateDir
	}
	if *logLevel != "" {
		lvl, err := config.ParseLogLevel(*logLevel)
		if err != nil {
			fmt.Fprintf(stderr, "manad: --log-level: %v\n", err)
			return 2
		}
		cfg.Daemon.LogLevel = lvl
	}
	if *logFormat != "" {
		cfg.Daemon.LogFormat = *logFormat
	}
	if *metricsListen != "" {
		cfg.Daemon.MetricsListen = *metricsListen
	}
	if err := cfg.Daemon.Validate(); err != nil {
		fmt.Fprintf(stderr, "manad: %v\n", err)
		return 2
	}
	if *check {
		fmt.Fprintf(stdout, "%s: OK, %d port(s)\n", cfg.File, len(cfg.Ports))
		for _, p := range cfg.Ports {
			fmt.Fprintf(stdout, "  %s: segment %s, netns %q, %d queues, MTU %d, page size %d\n",
				p.Name, p.Segment, p.NetNS, p.Queues, p.MTU, p.PageSize)
		}
		return 0
	}

	opts := &slog.HandlerOptions{Level: cfg.Daemon.LogLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if cfg.Daemon.LogFormat == "json" {
		h = slog.NewJSONHandler(stderr, opts)
	}
	log := slog.New(h)

	// Socket activation (manad.socket) is optional: without it manad listens on its own.
	listener, err := transport.ActivationListener()
	if err != nil {
		if !errors.Is(err, unix.ENOENT) {
			log.Error("socket activation", "err", err)
			return 1
		}
		listener = nil
	}
	d, err := daemon.New(daemon.Options{
		Config: cfg, Listener: listener, Logger: log,
		Ready: func() { _, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyReady) },
	})
	if err != nil {
		log.Error("manad cannot start", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Run(ctx); err != nil {
		log.Error("manad failed", "err", err)
		if errors.Is(err, config.ErrStateNewer) || errors.Is(err, config.ErrStateFile) {
			return 2 // restarting cannot fix it (RestartPreventExitStatus=2)
		}
		return 1
	}
	_, _ = sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	return 0
}
