// Package helperproc builds the binaries bench/ programs run (manad, bench/taprelay) and starts
// the long-lived ones, waiting until they say they are ready.
package helperproc

import (
	"bufio"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/manad/manad/bench/internal/teardown"
)

// Timeout is how long Start waits for the ready line.
const Timeout = 30 * time.Second

// Start runs args as a long-lived helper, adds it to td (which stops it at teardown), and waits
// until it prints a line containing ready on its standard output or error. Errors: the start's,
// or one saying the helper exited before it was ready or was not ready within Timeout (it is
// left to td either way).
func Start(td *teardown.List, ready string, args ...string) error {
	cmd := exec.Command(args[0], args[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	td.Proc(cmd)
	sc := bufio.NewScanner(out)
	found := make(chan bool, 1)
	go func() {
		ok := false
		for sc.Scan() { // read to the end: a helper blocked on a full pipe would stall
			if !ok && strings.Contains(sc.Text(), ready) {
				ok = true
				found <- true
			}
		}
		if !ok {
			found <- false
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			return fmt.Errorf("%s exited before it was ready", strings.Join(args, " "))
		}
		return nil
	case <-time.After(Timeout):
		return fmt.Errorf("%s not ready after %v", strings.Join(args, " "), Timeout)
	}
}

// Binary returns path when it is set (a binary given on the command line), or else builds the
// package pkg (a path relative to the module root, the working directory of `go run ./bench/X`,
// such as "./cmd/manad") into dir, without the race detector, and returns the binary's path.
// Errors: go build's, with its output.
func Binary(path, dir, pkg string) (string, error) {
	if path != "" {
		return path, nil
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}
