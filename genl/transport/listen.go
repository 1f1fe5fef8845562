package transport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// Listen creates the SOCK_SEQPACKET socket at path: the parent directory is
// created 0755 if missing, a stale socket is replaced, the socket gets mode
// (documented default 0666: anyone may connect and GET; rights come from
// credentials) and, when gid >= 0, group gid. It fails with EADDRINUSE when
// a server already answers on path (see checkLiveness: a server being killed
// is waited for), and with EEXIST when path is not a socket.
func Listen(path string, mode os.FileMode, gid int) (*net.UnixListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("genl: create socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("genl: %s exists and is not a socket: %w", path, unix.EEXIST)
		}
		if err := checkLiveness(path); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("genl: remove stale socket: %w", err)
		}
	}
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("genl: listen: %w", err)
	}
	if err := os.Chmod(path, mode.Perm()); err != nil {
		l.Close()
		return nil, fmt.Errorf("genl: chmod socket: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("genl: chown socket: %w", err)
		}
	}
	return l, nil
}

// ActivationListener returns the SOCK_SEQPACKET listener that systemd
// passed to the process (a socket unit with ListenSequentialPacket=), for
// Serve. It fails with an error wrapping ENOENT when there is none.
func ActivationListener() (*net.UnixListener, error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, fmt.Errorf("genl: socket activation: %w", err)
	}
	for _, l := range ls {
		if ul, ok := l.(*net.UnixListener); ok && ul.Addr().Network() == "unixpacket" {
			return ul, nil
		}
	}
	return nil, fmt.Errorf("genl: no SOCK_SEQPACKET listener passed by systemd: %w", unix.ENOENT)
}
