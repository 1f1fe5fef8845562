// Package readme runs the user guide in README.md, verbatim, so that the guide cannot rot: the
// commands of every block marked <!-- guide:… --> run as a newcomer would run them (manad in one
// terminal, the monitor in another, the steps in a third), as root, inside a private mount
// namespace whose /run/manad, /run/netns and /var/lib/manad are fresh, so the run neither sees
// nor disturbs a manad already running on the machine; and then, after the guide's own reset,
// a second time.
package readme

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manad/manad/tests/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// block is one fenced shell block of the guide and the marker before it.
type block struct {
	kind string // daemon, step, monitor, install, tests
	cmds []string
}

var marker = regexp.MustCompile(`^<!-- guide:(\w+) -->$`)

// guideBlocks returns the marked blocks of README.md in order.
func guideBlocks(t *testing.T) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot(), "README.md"))
	require.NoError(t, err)
	defer f.Close()
	var out []block
	var cur *block
	kind := ""
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && marker.MatchString(line):
			kind = marker.FindStringSubmatch(line)[1]
		case !in && kind != "" && line == "```sh":
			in = true
			out = append(out, block{kind: kind})
			cur = &out[len(out)-1]
		case in && line == "```":
			in, kind, cur = false, "", nil
		case in:
			if cmd := strings.TrimSpace(line); cmd != "" && !strings.HasPrefix(cmd, "#") {
				cur.cmds = append(cur.cmds, cmd)
			}
		}
	}
	require.NotEmpty(t, out, "README.md has no guide blocks")
	return out
}

// TestGuideMatchesCI checks the guide's install and test steps against what CI really does: the
// packages it tells a user to install are ones .ci/run installs, and its test command is the one
// .ci/run runs.
func TestGuideMatchesCI(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(moduleRoot(), ".ci", "run"))
	require.NoError(t, err)
	pkgs := regexp.MustCompile(`pkgs=\(([^)]*)\)`).FindSubmatch(ci)
	require.NotNil(t, pkgs, ".ci/run has no pkgs=(…) list")
	ciPkgs := strings.Fields(string(pkgs[1]))
	var sawInstall, sawTests bool
	for _, b := range guideBlocks(t) {
		switch b.kind {
		case "install":
			sawInstall = true
			for _, c := range b.cmds {
				if rest, ok := strings.CutPrefix(c, "sudo apt-get install -y "); ok {
					for _, p := range strings.Fields(rest) {
						if p != "make" {
							assert.True(t, slices.Contains(ciPkgs, p), "README tells users to install %s, which CI does not install", p)
						}
					}
				}
			}
			assert.True(t, slices.ContainsFunc(b.cmds, func(c string) bool { return strings.HasPrefix(c, "make build") }), "the install step does not build")
		case "tests":
			sawTests = true
			if len(b.cmds) != 1 || b.cmds[0] != "sudo make test" || !strings.Contains(string(ci), "\nmake test\n") {
				t.Errorf("README's test command %q is not what .ci/run runs", b.cmds)
			}
		}
	}
	if !sawInstall || !sawTests {
		t.Errorf("guide lacks the install (%v) or test (%v) step", sawInstall, sawTests)
	}
}

// passes is how many times TestGuide runs the guide in a row: the guide must hold when run again
// after its own reset (issue 28), not only on a fresh machine.
const passes = 2

// TestGuide runs the guide twice in a row, as a reader starting over would: manad in one
// terminal, the monitor in another, the steps in a third; at the reset block, manad and the
// monitor are stopped with Ctrl-C (the reset must refuse while manad runs) and the reset runs;
// then everything again, which must print what the first run printed.
func TestGuide(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"unshare", "make", "ping", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.SkipOrFail(t, "the guide needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	daemonLog := func(pass int) string { return filepath.Join(dir, fmt.Sprintf("daemon-%d.log", pass)) }
	monitorLog := func(pass int) string { return filepath.Join(dir, fmt.Sprintf("monitor-%d.log", pass)) }
	var s strings.Builder
	// Job control puts each "terminal" in its own process group, so that the test can press
	// Ctrl-C (SIGINT to the group) in it as the reader would.
	s.WriteString(`set -e -m
sudo() { "$@"; }   # the guide is written for a user with sudo; the test already is root
for d in /run/netns /run/manad /var/lib/manad; do mkdir -p "$d"; mount -t tmpfs tmpfs "$d"; done
mount --make-private /run/netns
ctrlc() { kill -INT -- "-$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
cleanup() { if [ -n "$M" ]; then ctrlc "$M"; fi; if [ -n "$D" ]; then ctrlc "$D"; fi; }
trap cleanup EXIT
M= D=
`)
	// stop presses Ctrl-C in the monitor's and manad's terminals and waits for manad to say so.
	stop := func(pass int) string {
		return `ctrlc $M; M=
ctrlc $D; D=
for i in $(seq 300); do grep -q "manad stopped" ` + daemonLog(pass) + ` && break; sleep 0.1; done
`
	}
	blocks := guideBlocks(t)
	require.True(t, slices.ContainsFunc(blocks, func(b block) bool { return b.kind == "reset" }), "the guide has no reset block (<!-- guide:reset -->): it cannot be run twice")
	for pass := 1; pass <= passes; pass++ {
		fmt.Fprintf(&s, "echo '== pass %d'\n", pass)
		reset := false
		for _, b := range blocks {
			cmds := strings.Join(b.cmds, "\n")
			switch b.kind {
			case "daemon":
				s.WriteString("(\n" + cmds + "\n) >" + daemonLog(pass) + " 2>&1 &\nD=$!\n")
				s.WriteString(`for i in $(seq 600); do [ -S /run/manad/manad.sock ] && grep -q "manad ready" ` + daemonLog(pass) + ` && break; kill -0 $D || exit 1; sleep 0.1; done
grep -q "manad ready" ` + daemonLog(pass) + "\n")
			case "monitor":
				s.WriteString("(\n" + cmds + "\n) >" + monitorLog(pass) + " 2>&1 &\nM=$!\nsleep 0.5\n")
			case "step":
				for _, c := range b.cmds {
					s.WriteString("echo '$ " + strings.ReplaceAll(c, "'", `'\''`) + "'\n" + c + "\n")
				}
			case "reset":
				reset = true
				s.WriteString(`if (
` + cmds + `
) >` + filepath.Join(dir, "early-reset.log") + ` 2>&1; then echo "the reset ran while manad was running"; exit 1; fi
grep -q "manad is running" ` + filepath.Join(dir, "early-reset.log") + "\nsleep 0.5\n" + stop(pass))
				for _, c := range b.cmds {
					s.WriteString("echo '$ " + strings.ReplaceAll(c, "'", `'\''`) + "'\n" + c + "\n")
				}
			}
		}
		if !reset {
			s.WriteString("sleep 0.5\n" + stop(pass))
		}
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "bash", "-c", s.String())
	cmd.Dir = moduleRoot()
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute * passes):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the guide did not finish in %d minutes", 5*passes)
	}
	logs := func(pass int) string {
		d, _ := os.ReadFile(daemonLog(pass))
		m, _ := os.ReadFile(monitorLog(pass))
		return fmt.Sprintf("--- manad (run %d):\n%s\n--- monitor (run %d):\n%s", pass, d, pass, m)
	}
	require.NoError(t, err, "the guide failed: %v\n%s\n%s\n%s", err, out, logs(1), logs(2))
	for pass := 1; pass <= passes; pass++ {
		// This run's output: from its marker to the next one.
		_, o, _ := strings.Cut(string(out), fmt.Sprintf("== pass %d\n", pass))
		o, _, _ = strings.Cut(o, fmt.Sprintf("== pass %d\n", pass+1))
		// What a reader of the guide is told to expect.
		for _, want := range []string{
			"0% packet loss",
			"$ ./bin/manactl --version\nmanactl ", // the guide's version step
			"mana0  manaA  up     1500  4K",
			"mana1  manaB  up     1500  4K", // list on the host shows every namespace's ports
			"Private flags for mana0:\nfull-page-rx: off",
			"Ring parameters for mana0:",
			"Mode:              page-pool fragments, 2 per page",
			"Pages per queue:   512",
			"Why:               full-page-rx private flag is on",
			"Buffers per page  31         35            1",
			"NIC statistics:",
		} {
			assert.Contains(t, o, want, "run %d of the guide: output lacks", pass)
		}
		if pass > 1 {
			assert.Contains(t, o, "$ sudo make demo-reset\n", "run %d of the guide: no reset ran", pass)
		}
		monitor, _ := os.ReadFile(monitorLog(pass))
		assert.Contains(t, string(monitor), "Private flags for mana0:\nfull-page-rx: on", "run %d: monitor did not show the flag change:\n%s", pass, monitor)
		daemon, _ := os.ReadFile(daemonLog(pass))
		assert.Contains(t, string(daemon), "every RX buffer returned", "run %d: manad did not stop cleanly:\n%s", pass, daemon)
		assert.NotContains(t, string(daemon), "still in flight", "run %d: manad did not stop cleanly:\n%s", pass, daemon)
	}
}

// TestMakeHelp: `make help` lists the targets a newcomer needs, the guide's reset among them, and
// names no file or folder that a clone does not have (build output under bin/ aside): it once
// sent readers to a seeds folder that only existed where the project was written.
func TestMakeHelp(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		testenv.SkipOrFail(t, "make help needs make: %v", err)
	}
	cmd := exec.Command("make", "-s", "help")
	cmd.Dir = moduleRoot()
	out, err := cmd.Output()
	require.NoError(t, err, "make help: %v\n%s", err, out)
	for _, target := range []string{"build", "run", "test", "demo-reset", "install", "help"} {
		assert.True(t, regexp.MustCompile(`(?m)^`+target+` `).Match(out), "make help does not list %s:\n%s", target, out)
	}
	for _, p := range regexp.MustCompile(`[\w.-]+(?:/[\w.-]+)+`).FindAllString(string(out), -1) {
		p = strings.TrimPrefix(p, "./")
		if strings.HasPrefix(p, "bin/") {
			continue // what make build writes
		}
		_, err := os.Stat(filepath.Join(moduleRoot(), p))
		assert.NoError(t, err, "make help names %s, which a clone does not have", p)
	}
}
