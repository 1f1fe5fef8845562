package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/manad/manad/cmd/manactl/internal/ethioctl"
	"github.com/manad/manad/cmd/manactl/internal/nlbridge"
	"github.com/manad/manad/cmd/manactl/internal/supervisor"
	"github.com/manad/manad/genl/client"
)

// execExit carries the exit status of the program `manactl exec` ran: manactl exits with it.
type execExit struct{ code int }

func (e *execExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Exec is a top-level command (see topLevel).
func (t topLevel) Exec() *cobra.Command { return execCmd(t.app) }

func execCmd(a *app) *cobra.Command {
	var verbose, noNetlink bool
	cmd := &cobra.Command{
		Use:   "exec [--socket PATH] [--] CMD [ARG...]",
		Short: "Run a program that sees manad's ports as MANA NICs (ethtool, YNL, NetworkManager, Go programs)",
		Long: `exec runs CMD, and every process it starts, so that its generic-netlink sockets and its
SIOCETHTOOL ioctls see manad's ports as MANA NICs, and everything else as the kernel shows
it. Any program works unmodified, dynamically or statically linked: ethtool (its netlink
and its ioctl paths), the kernel's YNL client, NetworkManager, Go programs on
mdlayher/ethtool or vishvananda/netlink.

How: a seccomp user-notification filter traps the program's socket(AF_NETLINK, *,
NETLINK_GENERIC) and ioctl(*, SIOCETHTOOL, *) (and, on the bridged sockets only, bind,
getsockname, setsockopt, recvmsg, ...); every other syscall runs at full speed. Each
generic-netlink socket becomes a bridge: nlctrl answers with the kernel's family ids and op
lists for "ethtool" and "netdev" (plus manad's own family); a request that names a manad
port goes to manad, any other to a kernel socket in the program's network namespace; dumps
merge both, and group joins subscribe to both (ethtool --monitor shows kernel and manad
changes). rtnetlink (ip link, ...) is not bridged: a port's TAP is a real netdev.

Credentials: manad sees the caller's user, so changes need root or manad's admin_group as
with manactl. seccomp requires no_new_privs: under exec, setuid and file-capability
programs (sudo, ping on some systems) run without gaining privileges.

The program's exit status, stdin/stdout/stderr and environment pass through; SIGINT,
SIGTERM, SIGHUP and SIGQUIT are forwarded to it. A program killed by signal N gives status
128+N. Needs Linux 5.14 or later (SECCOMP_ADDFD_FLAG_SEND) and a running manad; without
either, exec prints one line and exits with status 1 before starting CMD. CMD not found:
127; not executable: 126.`,
		Example: `  manactl exec -- ethtool --set-priv-flags mana0 full-page-rx on
  ip netns exec manaA manactl exec -- ethtool -i mana0
  manactl exec --no-netlink -- ethtool -g mana0        # ethtool's ioctl path
  manactl exec -- ethtool --monitor
  manactl exec -- ynl --family ethtool --do rings-get --json '{"header": {"dev-name": "mana0"}}'
  manactl --socket /tmp/manad.sock exec -- go test ./...`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("exec needs a program to run: manactl exec [--] CMD [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.exec(cmd.Context(), args, verbose, noNetlink)
		},
	}
	cmd.Flags().SetInterspersed(false) // everything after CMD is CMD's
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log the bridge's decisions to stderr")
	cmd.Flags().BoolVar(&noNetlink, "no-netlink", false, "bridge SIOCETHTOOL only: the program's generic-netlink sockets fail with EPROTONOSUPPORT, "+
		"as on a kernel without it, so a tool takes its ioctl path (ethtool's --disable-netlink, for an ethtool without it)")
	return cmd
}

// exec is `manactl exec`.
func (a *app) exec(ctx context.Context, args []string, verbose, noNetlink bool) error {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "manactl exec")
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(a.stderr, "manactl exec: %s: %v\n", args[0], errors.Unwrap(err))
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return &execExit{code: 127}
		}
		return &execExit{code: 126}
	}
	if err := supervisor.CheckKernel(); err != nil {
		return failed(fmt.Errorf("manactl exec: %w", err))
	}
	// A run that cannot reach manad would show its ports as tun devices: refuse it.
	c, err := client.Dial(a.socket)
	if err != nil {
		return failed(fmt.Errorf("manactl exec: %w (is manad running? start it, or give --socket PATH)", err))
	}
	c.Close()

	ioctls := &netnsHandlers{path: a.socket, log: log, m: make(map[uint64]*nsHandler)}
	defer ioctls.close()
	ex, err := supervisor.Run(ctx, supervisor.Config{
		Path: path, Args: args, Env: os.Environ(),
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		OpenNetlink: func(ctx context.Context, t supervisor.Target) (supervisor.NetlinkSocket, error) {
			if noNetlink {
				return nil, unix.EPROTONOSUPPORT // netlink_create without the protocol
			}
			return nlbridge.Open(ctx, nlbridge.Options{ManadPath: a.socket, InNetNS: t.InNetNS, Logger: log})
		},
		Ethtool: func(ctx context.Context, t supervisor.Target, ifr uint64) (handled bool, ret int, err error) {
			// In the program's namespace (a no-op when it is manactl's own): the client's
			// redial, after manad restarted or closed an idle connection, then connects
			// from there too, and manad keeps resolving names in the program's namespace.
			nserr := t.InNetNS(func() error {
				handled, ret, err = ioctls.get(t).Handle(ctx, t.Mem, ifr)
				return nil
			})
			if nserr != nil {
				log.Debug("SIOCETHTOOL: cannot enter the program's network namespace, left to the kernel", "err", nserr)
				return false, 0, nil
			}
			return handled, ret, err
		},
		Logger: log,
	})
	if err != nil {
		return failed(fmt.Errorf("manactl exec: %w", err))
	}
	return &execExit{code: ex.Code}
}

// netnsHandlers keeps one SIOCETHTOOL handler, and its manad client, per network namespace the
// program's ioctls come from: manad scopes device names by the namespace of the connecting
// socket, so the client is dialled from inside it, and a handler's memory of which names were
// ports belongs to one namespace.
type netnsHandlers struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	m    map[uint64]*nsHandler
}

type nsHandler struct {
	*ethioctl.Handler
	mu sync.Mutex
	c  *client.Client
}

// get returns the handler of t's namespace; its client is dialled at its first use, and again
// after a failed dial (manad may start later).
func (n *netnsHandlers) get(t supervisor.Target) *nsHandler {
	n.mu.Lock()
	defer n.mu.Unlock()
	if h, ok := n.m[t.NetNS]; ok {
		return h
	}
	h := &nsHandler{}
	h.Handler = ethioctl.New(ethioctl.Options{Logger: n.log, Client: func(context.Context) (*client.Client, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.c != nil {
			return h.c, nil
		}
		var err error
		h.c, err = client.Dial(n.path) // on a thread in the program's namespace (see Run's Ethtool)
		return h.c, err
	}})
	n.m[t.NetNS] = h
	return h
}

func (n *netnsHandlers) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.m {
		h.mu.Lock()
		if h.c != nil {
			h.c.Close()
		}
		h.mu.Unlock()
	}
}
