package genl_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/manad/manad/genl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListenLiveness: Listen refuses a socket a server answers on at once, naming its pid; a
// socket that accepts connections but does not answer (a server being killed, whose socket
// stays open until its last thread exits) is probed again until it lets go, then replaced; one
// that never lets go is refused after the wait, saying that nothing answers.
func TestListenLiveness(t *testing.T) {
	t.Run("answering", func(t *testing.T) {
		ts := startServer(t, nil)
		_, err := genl.Listen(ts.path, 0o666, -1)
		assert.ErrorIs(t, err, unix.EADDRINUSE, "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
		assert.Contains(t, err.Error(), "already listening", "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
		assert.Contains(t, err.Error(), "(pid "+strconv.Itoa(os.Getpid())+")", "Listen on a live server's socket = %v; want EADDRINUSE naming pid %d", err, os.Getpid())
	})

	// mute listens on a fresh path without serving: connections succeed, nothing answers.
	mute := func(t *testing.T) (string, *net.UnixListener) {
		path := filepath.Join(t.TempDir(), "m.sock")
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		require.NoError(t, err)
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
		require.NoError(t, err, "Listen after the old server let go")
		l.Close()
	})

	t.Run("stuck", func(t *testing.T) {
		path, _ := mute(t)
		start := time.Now()
		_, err := genl.Listen(path, 0o666, -1)
		assert.ErrorIs(t, err, unix.EADDRINUSE, "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		assert.Contains(t, err.Error(), "does not answer", "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		assert.Contains(t, err.Error(), "remove "+path, "Listen on a socket nothing answers = %v; want EADDRINUSE saying nothing answers", err)
		took := time.Since(start)
		assert.GreaterOrEqual(t, took, 4*time.Second, "gave up after %v: a dying server must get its time", took)
		if _, err := os.Lstat(path); err != nil {
			t.Errorf("the socket of a server that may live was removed: %v", err)
		}
	})
}
