package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/manad/manad/cmd/manactl/internal/supervisor"
)

func main() {
	if os.Getenv(supervisor.ChildEnv) != "" {
		supervisor.ChildMain() // manactl exec's re-executed self: becomes the program
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is manactl: it parses args (after the ethtool-style rewrite), runs the command and returns
// the exit status. Runtime errors print one line on stderr and give ethtool's status for the
// same failure (exitStatus: 1 unless ethtool says otherwise), with a hint of the fix where
// manactl can tell (withHints); usage errors print the problem and a hint and give 1.
func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, argv: args}
	root := newRoot(a, env)
	opts, err := ethtoolOptions(root)
	if err != nil {
		fmt.Fprintf(stderr, "manactl: %v\n", err)
		return exitUsage
	}
	root.SetArgs(rewriteEthtoolArgs(opts, args))
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *execExit
	if errors.As(err, &ee) {
		return ee.code // the program's own status, as it ended (manactl exec)
	}
	var rerr *runtimeError
	if errors.As(err, &rerr) {
		e := a.withHints(ctx, cmd, rerr.err)
		fmt.Fprintln(stderr, errorLine(e))
		return exitStatus(commandName(cmd), e)
	}
	fmt.Fprintf(stderr, "manactl: %v\nTry '%s --help'.\n", err, cmd.CommandPath())
	return exitUsage
}

// writeJSONLine prints v as one line of JSON (monitor --json).
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
