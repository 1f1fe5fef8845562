package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestartAfterKill9 (issue 28): manad killed with SIGKILL while a client keeps it busy,
// then started again at once — before the old process has finished exiting, when its socket
// may still accept connections — comes up, several times in a row: the new manad waits for the
// dying one to let go of the socket instead of taking it for a live server.
func TestRestartAfterKill9(t *testing.T) {
	testenv.RequireRoot(t)
	// Without the race detector: its slower start hides the window in which the old manad's
	// socket outlives it.
	bin, _ := harness.PlainBinaries(t)
	dir := t.TempDir()
	ns := harness.Name("mrk", "")
	sock := filepath.Join(dir, "manad.sock")
	cfg := filepath.Join(dir, "manad.toml")
	// Big rings on 64K pages (about 280 MiB a port): memory the kernel tears down before it
	// closes the killed manad's files, 50-100 ms during which its socket accepts connections.
	var ports strings.Builder
	for i := range 2 {
		fmt.Fprintf(&ports, "[[port]]\nname = %q\nnetns = %q\nsegment = \"s\"\nqueues = 16\nmax_queues = 16\nrx_ring = 8192\npage_size = \"64K\"\npersistent = false\n",
			harness.Name("mrk", fmt.Sprint(i)), ns)
	}
	text := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n%s", sock, filepath.Join(dir, "state"), ports.String())
	require.NoError(t, os.WriteFile(cfg, []byte(text), 0o644))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })

	var procs []*exec.Cmd
	waited := map[*exec.Cmd]chan error{}
	start := func(round int) *exec.Cmd {
		t.Helper()
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("manad-%d.log", round)))
		require.NoError(t, err)
		defer logf.Close()
		cmd := exec.Command(bin, "--config", cfg)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		procs = append(procs, cmd)
		waited[cmd] = done
		return cmd
	}
	logOf := func(round int) string {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("manad-%d.log", round)))
		return string(b)
	}
	t.Cleanup(func() {
		for _, cmd := range procs {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, cmd := range procs {
			select {
			case <-waited[cmd]:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-waited[cmd]
			}
		}
	})
	ready := func(round int, cmd *exec.Cmd) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case err := <-waited[cmd]:
				waited[cmd] <- err
				t.Fatalf("round %d: manad exited at start: %v\n%s", round, err, logOf(round))
			default:
			}
			if strings.Contains(logOf(round), "manad ready") {
				if c, err := client.Dial(sock); err == nil {
					_, err = c.Ports(context.Background())
					c.Close()
					if err == nil {
						return
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: manad did not become ready\n%s", round, logOf(round))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	cmd := start(0)
	ready(0, cmd)
	const rounds = 4
	for round := 1; round <= rounds; round++ {
		// A client in a request loop, on connections of its own, until its manad is gone.
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := client.Dial(sock)
				if err != nil {
					return
				}
				defer c.Close()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.Ports(context.Background()); err != nil {
						return
					}
				}
			}()
		}
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		next := start(round) // at once: the old manad is still exiting
		close(stop)
		wg.Wait()
		err := <-waited[cmd]
		assert.ErrorContains(t, err, "killed", "round %d: the old manad ended with %v, want killed", round, err)
		waited[cmd] <- nil
		ready(round, next)
		assert.NotContains(t, logOf(round), "already listening", "round %d", round)
		cmd = next
	}
}
