package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl/nlattr"
)

// How Listen tells a live server from a stale socket file. A server killed with SIGKILL keeps
// its listening socket open until its last thread has exited (the kernel tears the memory down
// first, exit_mm before exit_files): connections to it succeed meanwhile but nothing answers.
const (
	// livenessWait bounds how long Listen keeps probing a socket that accepts connections but
	// does not answer before it gives up with EADDRINUSE.
	livenessWait = 5 * time.Second
	// livenessReply is how long one probe waits for the answer to its NLMSG_NOOP.
	livenessReply = 250 * time.Millisecond
	// livenessPause is the pause between two probes.
	livenessPause = 20 * time.Millisecond
)

// checkLiveness decides whether the socket at path belongs to a server that is still running.
// It returns nil when the file may be replaced: nothing accepts connections on it (ECONNREFUSED),
// or the process that listens on it (SO_PEERCRED) is gone or a zombie (its sockets are closing).
// It probes a socket that accepts connections with an NLMSG_NOOP request asking for an ACK, which
// every manad answers, and keeps probing for up to livenessWait while nothing answers, so that a
// server being killed has the time to let go of its socket.
//
// Errors: EADDRINUSE when a server answers, naming its pid, or when the socket still accepts
// connections that nothing answers after livenessWait (a stopped process, a server stuck
// exiting), saying so.
func checkLiveness(path string) error {
	deadline := time.Now().Add(livenessWait)
	pid := 0
	for {
		answered, peer, err := probe(path)
		if peer > 0 {
			pid = peer
		}
		switch {
		case errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT):
			return nil // nothing listens: a stale file
		case answered:
			return fmt.Errorf("genl: a server%s is already listening on %s: %w", pidText(pid), path, unix.EADDRINUSE)
		case pid > 0 && !processRunning(pid):
			return nil // its listener is exiting: the socket goes with it
		case time.Now().After(deadline):
			why := "it accepts connections but does not answer"
			if err != nil {
				why = "connecting to it fails: " + err.Error()
			}
			return fmt.Errorf("genl: a server%s holds %s, but %s after %v (stopped, or stuck exiting?): "+
				"stop it, or remove %s if no manad runs: %w", pidText(pid), path, why, livenessWait, path, unix.EADDRINUSE)
		}
		time.Sleep(livenessPause)
	}
}

// probe connects to path, notes the listener's pid (SO_PEERCRED, 0 when unknown) and reports
// whether it answered an NLMSG_NOOP within livenessReply. err is the connection's error, or nil.
func probe(path string) (answered bool, pid int, err error) {
	c, err := net.DialTimeout("unixpacket", path, livenessReply)
	if err != nil {
		return false, 0, err
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	if raw, err := uc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				pid = int(cred.Pid)
			}
		})
	}
	var req [nlattr.MsgHdrLen]byte
	binary.NativeEndian.PutUint32(req[0:], nlattr.MsgHdrLen)
	binary.NativeEndian.PutUint16(req[4:], unix.NLMSG_NOOP)
	binary.NativeEndian.PutUint16(req[6:], nlattr.FlagRequest|nlattr.FlagAck)
	binary.NativeEndian.PutUint32(req[8:], 1) // seq
	if err := uc.SetDeadline(time.Now().Add(livenessReply)); err != nil {
		return false, pid, nil
	}
	if _, err := uc.Write(req[:]); err != nil {
		return false, pid, nil
	}
	var buf [256]byte
	n, err := uc.Read(buf[:])
	return err == nil && n >= nlattr.MsgHdrLen, pid, nil
}

// processRunning reports whether process pid exists and is not a zombie or dead (/proc/PID/stat's
// state). It errs on the side of running when /proc cannot tell.
func processRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	// "PID (COMM) STATE …": COMM may hold spaces and parentheses; the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	switch s[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}

func pidText(pid int) string {
	if pid <= 0 {
		return ""
	}
	return " (pid " + strconv.Itoa(pid) + ")"
}
