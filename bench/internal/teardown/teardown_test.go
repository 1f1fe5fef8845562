package teardown

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary play a benchmark that set things up and waits to be killed.
func TestMain(m *testing.M) {
	if ns := os.Getenv("TEARDOWN_TEST_NETNS"); ns != "" {
		var l List
		l.OnSignal()
		l.NetNS(ns)
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			fmt.Fprintln(os.Stderr, "ip netns add:", err, string(out))
			os.Exit(2)
		}
		sleep := exec.Command("sleep", "600")
		if err := sleep.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		l.Proc(sleep)
		dir, _ := os.MkdirTemp("", "teardown-")
		l.Dir(dir)
		fmt.Println("ready", sleep.Process.Pid, dir)
		time.Sleep(time.Minute)
		os.Exit(3) // not reached: the signal's teardown exits
	}
	os.Exit(m.Run())
}

// TestSignalTearsDown kills a process that set up a namespace, a child process and a directory
// with each signal OnSignal handles, and checks that all three are gone and that the exit status
// is 128 plus the signal's number.
func TestSignalTearsDown(t *testing.T) {
	testenv.RequireRoot(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			ns := fmt.Sprintf("tdtest%d%d", os.Getpid()%100000, int(sig))
			t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), "TEARDOWN_TEST_NETNS="+ns)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			line, err := bufio.NewReader(out).ReadString('\n')
			f := strings.Fields(line)
			if err != nil || len(f) != 3 || f[0] != "ready" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("child said %q, %v", line, err)
			}
			sleepPID, _ := strconv.Atoi(f[1])
			dir := f[2]
			require.NoError(t, cmd.Process.Signal(sig))
			err = cmd.Wait()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 128+int(sig) {
				t.Errorf("after %v: %v, want exit status %d", sig, err, 128+int(sig))
			}
			if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns) {
				t.Errorf("namespace %s survived %v", ns, sig)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("directory %s survived %v: %v", dir, sig, err)
			}
			// The child's sleep was reaped by the child: the pid is gone (or reused by then,
			// which a signal 0 cannot tell apart; a fresh pid this soon is unlikely).
			if err := syscall.Kill(sleepPID, 0); err == nil {
				t.Errorf("process %d survived %v", sleepPID, sig)
				syscall.Kill(sleepPID, syscall.SIGKILL)
			}
		})
	}
}

// TestRunOnce checks that Run removes what was added and that a second Run finds nothing.
func TestRunOnce(t *testing.T) {
	var l List
	dir := t.TempDir() + "/x"
	require.NoError(t, os.Mkdir(dir, 0o755))
	l.Dir(dir)
	assert.Nil(t, l.LastProc(), "LastProc of an empty list is not nil")
	c := exec.Command("sleep", "600")
	require.NoError(t, c.Start())
	l.Proc(c)
	assert.Same(t, c, l.LastProc(), "LastProc is not the process added")
	l.Run()
	_, err := os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "directory survived Run: %v", err)
	if c.ProcessState == nil || c.ProcessState.Success() {
		t.Errorf("sleep not stopped by Run: %v", c.ProcessState)
	}
	l.Run() // nothing left: must not wait on or signal the process again
	assert.Nil(t, l.LastProc(), "Run left processes in the list")
}
