// Package harness runs the real manad and manactl binaries for integration tests: it builds them
// once per test binary, starts manad with a generated configuration (its own socket, state
// directory and network namespaces, named uniquely per test), and offers the namespace plumbing
// the tests need (clients, sockets and commands inside a namespace).
//
// Every function that needs root calls testenv.RequireRoot, so a developer without root sees a
// skip and CI (CI=true) a failure.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manad/manad/genl/client"
	"github.com/manad/manad/internal/nsrun"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/require"
)

// build is one set of the binaries, built once per test binary.
type build struct {
	once sync.Once
	dir  string
	err  error
}

var (
	raceBuild  build // what the tests run: with the race detector
	plainBuild build // what benchmarks run: rates of a race-instrumented daemon say little
)

// moduleRoot finds the directory of go.mod above this source file.
func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

func (b *build) get(t testing.TB, race bool) (manad, manactl string) {
	t.Helper()
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "manad-bin-"); b.err != nil {
			return
		}
		for _, c := range []string{"manad", "manactl"} {
			if _, err := os.Stat(filepath.Join(moduleRoot(), "cmd", c)); err != nil {
				continue
			}
			args := []string{"build", "-o", filepath.Join(b.dir, c), "./cmd/" + c}
			if race {
				args = []string{"build", "-race", "-o", filepath.Join(b.dir, c), "./cmd/" + c}
			}
			cmd := exec.Command("go", args...)
			cmd.Dir = moduleRoot()
			if out, err := cmd.CombinedOutput(); err != nil {
				b.err = fmt.Errorf("go build ./cmd/%s: %v\n%s", c, err, out)
				return
			}
		}
	})
	require.NoError(t, b.err)
	return filepath.Join(b.dir, "manad"), filepath.Join(b.dir, "manactl")
}

// Binaries builds cmd/manad and cmd/manactl with the race detector, once per test binary, and
// returns their paths.
func Binaries(t testing.TB) (manad, manactl string) { return raceBuild.get(t, true) }

// PlainBinaries builds them without the race detector, for benchmarks.
func PlainBinaries(t testing.TB) (manad, manactl string) { return plainBuild.get(t, false) }

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	for _, b := range []*build{&raceBuild, &plainBuild} {
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}

// Name returns a name unique to this test process, short enough for an interface (≤ 15 bytes):
// prefix + the PID's last digits + suffix (nsrun.Name).
func Name(prefix, suffix string) string { return nsrun.Name(prefix, suffix) }

// Daemon is a manad process started by a test.
type Daemon struct {
	t       testing.TB
	Bin     string
	Dir     string // holds the config, socket, state directory and log
	Config  string // path of the configuration file
	Socket  string
	LogPath string

	cmd  *exec.Cmd
	done chan error
	log  *os.File
	nss  []string
}

// Start writes cfg (the [[port]] tables, and any extra [daemon] keys) into a configuration with
// its own socket and state directory under dir (t.TempDir() when ""), starts manad and waits
// until it answers on its socket. netnss lists the namespaces the configuration names: they are
// deleted, with any persistent TAP in them, when the test ends. At the end of the test manad gets
// SIGTERM and must exit 0.
func Start(t testing.TB, dir, daemonExtra, ports string, netnss ...string) *Daemon {
	t.Helper()
	testenv.RequireRoot(t)
	bin, _ := Binaries(t)
	return StartBinary(t, bin, dir, daemonExtra, ports, netnss...)
}

// StartBinary is Start running the manad binary bin (PlainBinaries' for a benchmark).
func StartBinary(t testing.TB, bin, dir, daemonExtra, ports string, netnss ...string) *Daemon {
	t.Helper()
	testenv.RequireRoot(t)
	if dir == "" {
		dir = t.TempDir()
	}
	d := &Daemon{t: t, Bin: bin, Dir: dir, Socket: filepath.Join(dir, "manad.sock"),
		Config: filepath.Join(dir, "manad.toml"), LogPath: filepath.Join(dir, "manad.log"), nss: netnss}
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nlog_level = \"debug\"\n%s\n%s",
		d.Socket, filepath.Join(dir, "state"), daemonExtra, ports)
	require.NoError(t, os.WriteFile(d.Config, []byte(cfg), 0o644))
	t.Cleanup(func() {
		d.Stop()
		for _, ns := range d.nss {
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	d.start()
	return d
}

func (d *Daemon) start() {
	d.t.Helper()
	var err error
	if d.log, err = os.OpenFile(d.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		d.t.Fatal(err)
	}
	// Readiness is judged on what this run logs: the log is appended to across restarts.
	logStart := int64(0)
	if st, err := d.log.Stat(); err == nil {
		logStart = st.Size()
	}
	d.cmd = exec.Command(d.Bin, "--config", d.Config)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	// The race-enabled binary would sleep a second at every exit; a race report still fails
	// the run through the exit status (66).
	d.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(d.cmd, d.done)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := client.Dial(d.Socket); err == nil {
			_, perr := c.Ports(context.Background())
			c.Close()
			if perr == nil && strings.Contains(d.Log()[logStart:], "manad ready") {
				return
			}
		}
		select {
		case err := <-d.done:
			// Wait consumed the exit: Stop (run by Cleanup) must not wait for it again.
			d.cmd = nil
			d.log.Close()
			d.t.Fatalf("manad exited during startup: %v\n%s", err, d.Log())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("manad did not become ready\n%s", d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns what manad logged so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.LogPath)
	return string(b)
}

// Stop sends SIGTERM and waits for manad; it fails the test unless manad exits 0 and reported
// every RX buffer back.
func (d *Daemon) Stop() {
	d.t.Helper()
	if d.cmd == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		if err != nil {
			d.t.Errorf("manad exited with %v\n%s", err, d.Log())
		}
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("manad did not stop on SIGTERM\n%s", d.Log())
	}
	d.cmd = nil
	d.log.Close()
	if strings.Contains(d.Log(), "still in flight") {
		d.t.Errorf("manad stopped with RX buffers in flight\n%s", d.Log())
	}
}

// Kill9 kills manad with SIGKILL, as a crash would.
func (d *Daemon) Kill9() {
	d.t.Helper()
	d.cmd.Process.Kill()
	<-d.done
	d.cmd = nil
	d.log.Close()
}

// Restart starts manad again with the same configuration and state directory.
func (d *Daemon) Restart() {
	d.t.Helper()
	d.start()
}

// Client dials manad from inside network namespace ns ("" = the test's own) and closes the client
// at the end of the test.
func (d *Daemon) Client(ns string) *client.Client {
	d.t.Helper()
	var c *client.Client
	err := InNetNS(ns, func() error {
		var err error
		c, err = client.Dial(d.Socket)
		return err
	})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// InNetNS runs f on an OS thread that has entered network namespace ns (a name under
// /run/netns; "" runs f as is). Sockets f creates stay in ns after it returns (nsrun.In).
func InNetNS(ns string, f func() error) error { return nsrun.In(ns, f) }

// Run runs a command (inside ns when ns is not "") and returns its combined output; it fails the
// test when the command fails.
func Run(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := RunErr(ns, args...)
	require.NoError(t, err, "%s: %v\n%s", strings.Join(args, " "), err, out)
	return out
}

// RunErr is Run returning the error instead of failing (nsrun.Output).
func RunErr(ns string, args ...string) (string, error) { return nsrun.Output(ns, args...) }

// Eventually polls cond every 10ms until it is true or 10 seconds pass.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ErrnoOf is errors.As for a syscall.Errno, for messages in test failures.
func ErrnoOf(err error) syscall.Errno {
	var e syscall.Errno
	errors.As(err, &e)
	return e
}
