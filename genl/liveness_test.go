package genl_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
)

// TestListenLiveness: Listen refuses a socket a server answers on at once, naming its pid; a
// socket that accepts connections but does not answer (a server being killed, whose socket
// stays open until its last thread exits) is probed again until it lets go, then replaced; one
// that never lets go is refused after the wait, saying that nothing answers.
func TestListenLiveness(t *testing.T) {
	t.Run("answering", func(t *testing.T) {
		ts := startServer(t, nil)
		_, err := genl.Listen(ts.path, 0o666, -1)
		if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), "already listening") ||
			!strings.Contains(err.Error(), "(pid "+strconv.Itoa(os.Getpid())+")") {
			t.Errorf("Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
		}
	})

	// mute listens on a fresh path without serving: connections succeed, nothing answers.
	mute := func(t *testing.T) (string, *net.UnixListener) {
		path := filepath.Join(t.TempDir(), "m.sock")
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false) // as a killed process leaves it
		t.Cleanup(func() { l.Close() })
		return path, l
	}

	t.Run("dying", func(t *testing.T) {
		path, old := mute(t)
		go func() {
			time.Sleep(time.Second)
			old.Close() // the dying server's last thread exits
		}()
		l, err := genl.Listen(path, 0o666, -1)
		if err != nil {
			t.Fatalf("Listen after the old server let go: %v", err)
		}
		l.Close()
	})

	t.Run("stuck", func(t *testing.T) {
		path, _ := mute(t)
		start := time.Now()
		_, err := genl.Listen(path, 0o666, -1)
		if !errors.Is(err, unix.EADDRINUSE) || !strings.Contains(err.Error(), "does not answer") ||
			!strings.Contains(err.Error(), "remove "+path) {
			t.Errorf("Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		}
		if took := time.Since(start); took < 4*time.Second {
			t.Errorf("gave up after %v: a dying server must get its time", took)
		}
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("the socket of a server that may live was removed: %v", err)
		}
	})
}
