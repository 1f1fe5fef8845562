package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manad/manad/tests/harness"
	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// captureProc is a `manactl capture` running in a namespace: its stdout is collected, its stderr
// read until the "listening on" line (the capture then runs), the rest collected.
type captureProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan error
}

func startCapture(t *testing.T, d *harness.Daemon, ns string, args ...string) *captureProc {
	t.Helper()
	_, manactl := harness.Binaries(t)
	return startProc(t, exec.Command("ip", append([]string{"netns", "exec", ns, manactl, "--socket", d.Socket, "capture"}, args...)...))
}

// startProc starts cmd, a capture, and waits for its "listening on" line.
func startProc(t *testing.T, cmd *exec.Cmd) *captureProc {
	t.Helper()
	args := cmd.Args
	p := &captureProc{done: make(chan error, 1), cmd: cmd}
	p.cmd.Env = append(p.cmd.Environ(), "GORACE=atexit_sleep_ms=0")
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	listening := make(chan string, 1)
	go func() {
		r := bufio.NewReader(errPipe)
		line, _ := r.ReadString('\n')
		listening <- line
		p.stderr.WriteString(line)
		io.Copy(&p.stderr, r)
		p.done <- p.cmd.Wait()
	}()
	select {
	case line := <-listening:
		if !strings.HasPrefix(line, "listening on ") {
			<-p.done
			t.Fatalf("manactl capture %v: %q, want the listening line\n%s", args, line, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("manactl capture %v did not start", args)
	}
	return p
}

// wait waits for manactl to exit 0 while f keeps traffic going.
func (p *captureProc) wait(t *testing.T, f func()) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case err := <-p.done:
			require.NoError(t, err, "manactl capture: %v\nstdout:\n%s\nstderr:\n%s", err, p.stdout.String(), p.stderr.String())
			return
		case <-deadline:
			t.Fatalf("manactl capture did not end\nstderr:\n%s", p.stderr.String())
		default:
			f()
		}
	}
}

// tcpdumpRead is `tcpdump -r file` (numeric): its output, failing the test when it fails.
func tcpdumpRead(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("tcpdump", "-n", "-Z", "root", "-r", file).CombinedOutput()
	require.NoError(t, err, "tcpdump -r %s: %v\n%s", file, err, out)
	return string(out)
}

// TestCaptureTcpdump: `manactl capture PORT -w FILE -c 3` while pinging writes a pcap file in
// which tcpdump sees the ICMP echo; a segment capture ended by SIGINT leaves a complete file
// with both directions of the ping and the counters on stderr; without -w each frame is a line.
func TestCaptureTcpdump(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("tcpdump"); err != nil {
		testenv.SkipOrFail(t, "needs tcpdump: %v", err)
	}
	p := startPair(t, "", "")
	ping := func() { harness.RunErr(p.nsA, "ping", "-c", "1", "-W", "1", p.ipB) }
	dir := t.TempDir()

	t.Run("port -c 3", func(t *testing.T) {
		file := filepath.Join(dir, "port.pcap")
		cp := startCapture(t, p.d, p.nsA, p.portA, "-w", file, "-c", "3", "--direction", "out")
		cp.wait(t, ping)
		assert.Contains(t, cp.stderr.String(), "3 packets captured", "stderr:\n%s\nwant 3 packets captured", cp.stderr.String())
		out := tcpdumpRead(t, file)
		n := strings.Count(out, "\n")
		assert.GreaterOrEqual(t, n, 3, "tcpdump -r read %d lines, want 3 with the echo request:\n%s", n, out)
		assert.Contains(t, out, fmt.Sprintf("IP %s > %s: ICMP echo request", p.ipA, p.ipB), "tcpdump -r read %d lines, want 3 with the echo request:\n%s", n, out)
		assert.NotContains(t, out, "echo reply", "--direction out captured the reply")
	})

	t.Run("segment SIGINT", func(t *testing.T) {
		file := filepath.Join(dir, "seg.pcap")
		cp := startCapture(t, p.d, p.nsA, "s", "-w", file)
		harness.Run(t, p.nsA, "ping", "-c", "3", "-i", "0.2", p.ipB)
		require.NoError(t, cp.cmd.Process.Signal(syscall.SIGINT))
		cp.wait(t, func() { time.Sleep(10 * time.Millisecond) })
		errText := cp.stderr.String()
		for _, want := range []string{"packets captured", "packets received by filter", "0 packets dropped by manad"} {
			assert.Contains(t, errText, want, "stderr")
		}
		out := tcpdumpRead(t, file)
		for _, want := range []string{
			fmt.Sprintf("IP %s > %s: ICMP echo request", p.ipA, p.ipB),
			fmt.Sprintf("IP %s > %s: ICMP echo reply", p.ipB, p.ipA),
		} {
			assert.GreaterOrEqual(t, strings.Count(out, want), 3, "tcpdump -r: want 3 times %q:\n%s", want, out)
		}
	})

	t.Run("pcap to a pipe", func(t *testing.T) {
		_, manactl := harness.Binaries(t)
		cp := startProc(t, exec.Command("ip", "netns", "exec", p.nsA, "sh", "-c",
			fmt.Sprintf("%s --socket %s capture %s -w - -c 4 --direction out | tcpdump -n -l -r -", manactl, p.d.Socket, p.portA)))
		cp.wait(t, ping)
		assert.Contains(t, cp.stdout.String(), fmt.Sprintf("IP %s > %s: ICMP echo request", p.ipA, p.ipB), "tcpdump -r - printed")
	})

	t.Run("refused", func(t *testing.T) {
		_, manactl := harness.Binaries(t)
		file := filepath.Join(dir, "keep.pcap")
		require.NoError(t, os.WriteFile(file, []byte("precious"), 0o644))
		out, err := harness.RunErr(p.nsA, manactl, "--socket", p.d.Socket, "capture", "no-such-seg", "-w", file)
		if err == nil || !strings.Contains(out, `netlink error: no port or segment named "no-such-seg": No such file or directory`) {
			t.Errorf("capture of an unknown target: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(file)
		assert.Equal(t, "precious", string(b), "a refused capture changed %s: %q", file, b)
	})

	t.Run("summary lines", func(t *testing.T) {
		cp := startCapture(t, p.d, p.nsB, p.portB, "-c", "2", "--direction", "in")
		cp.wait(t, ping)
		lines := strings.Split(strings.TrimSpace(cp.stdout.String()), "\n")
		require.Len(t, lines, 2, "%d lines, want 2:\n%s", len(lines), cp.stdout.String())
		for _, l := range lines {
			assert.Contains(t, l, " "+p.portB+" In ", "line %q: want %s In and an ethertype", l, p.portB)
			assert.Contains(t, l, "ethertype", "line %q: want %s In and an ethertype", l, p.portB)
		}
	})
}
