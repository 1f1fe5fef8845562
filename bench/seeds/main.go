// Command seeds reproduces the table of each seed thread (shared/seeds/000–004) with manad: the
// RX buffer model (vnic/rxbuf) for the figures that follow from the driver's arithmetic, and
// real traffic through real manad ports for the ones that must be measured, printed in the
// thread's own table shape. Every column is marked [model], [measured] or [thread (their
// hardware)], and every row ends with which of its figures are which; the thread's own figures
// come from its author's hardware and are never manad's.
//
//   - 001: buffers per page and RX memory per queue on 64K pages, MTU 1500 and 9000, the driver
//     before page-pool fragments (pre-frag, 1 per page) and after (35 per page at MTU 1500), and
//     TCP throughput in both.
//   - 000: fragment vs full-page-rx on 4K pages (the rule before the headroom fix) with more
//     than 16 TCP streams, and the blackout of one flip of the flag under that load.
//   - 002: a forwarding node (UDP 1400 B, 4 flows) whose ports follow the rule before and after
//     the headroom fix: forwarded pps and the frames delivered with less headroom than
//     LL_RESERVED_SPACE, which the kernel would pskb_expand_head.
//   - 003: XDP drop (skb mode) at 64 and 128 B: no page pool, a page-pool page, 2 fragments.
//   - 004: the 64 B drop-rate test with page recycling off and on.
//
// One manad process (the real binary, built without the race detector) holds every table's
// ports, in network namespaces of this run that are deleted at the end. Measured figures are the
// median [min–max] of -rounds rounds, the variants of a table taking turns within each round.
//
// Needs root. Usage:
//
//	go run ./bench/seeds [-rounds 3] [-seconds 1] [-json] [-smoke|-short] [-manad BIN]
//
// -smoke (or -short) runs one short round of everything (bench-smoke's convention); -json prints
// the measured figures as bench/internal/benchrow rows. `make seeds` runs it in full; bench/report
// runs it only in its smoke, so that it cannot rot without taking over README's benchmark table:
//
// bench: smoke-only
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/manad/manad/bench/internal/benchrow"
)

func main() {
	rounds := flag.Int("rounds", 3, "rounds of every measurement (median, min and max are reported)")
	seconds := flag.Float64("seconds", 1, "length of one measurement window")
	asJSON := flag.Bool("json", false, "print the measured figures as JSON rows instead of the tables")
	smoke := flag.Bool("smoke", false, "one short round of everything, to check the program works")
	short := flag.Bool("short", false, "same as -smoke")
	manadBin := flag.String("manad", "", "manad binary (default: go build ./cmd/manad)")
	flag.Parse()
	o := opts{rounds: *rounds, window: time.Duration(*seconds * float64(time.Second))}
	if *smoke || *short {
		o = opts{rounds: 1, window: 200 * time.Millisecond}
	}
	if err := validate(o, os.Geteuid()); err != nil {
		fmt.Fprintln(os.Stderr, "seeds:", err)
		os.Exit(2)
	}
	// Ctrl-C or SIGTERM: the next control request fails, and the namespaces and manad are
	// still torn down.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	tables, err := measure(ctx, *manadBin, o, *smoke || *short)
	stop()
	if err == nil {
		err = output(os.Stdout, tables, *asJSON)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seeds:", err)
		os.Exit(1)
	}
}

// validate checks the options before anything is set up: a message naming the bad flag, or the
// root requirement.
func validate(o opts, euid int) error {
	switch {
	case o.rounds < 1:
		return errors.New("-rounds must be at least 1")
	case o.window < 50*time.Millisecond || o.window > 10*time.Minute:
		return errors.New("-seconds must be between 0.05 and 600")
	case euid != 0:
		return errors.New("needs root (network namespaces, TAP devices, XDP)")
	}
	return nil
}

// measure builds the world, measures every table and tears it all down. Errors: setup, traffic or
// control failures, and manad not stopping cleanly.
func measure(ctx context.Context, manadBin string, o opts, short bool) (tables []table, err error) {
	e, err := newEnv(manadBin)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.close()) }()
	w, err := build(ctx, e)
	if err != nil {
		return nil, err
	}
	for _, f := range []func() (table, error){
		func() (table, error) { return w.seed000(ctx, o, short) },
		func() (table, error) { return w.seed001(ctx, o) },
		func() (table, error) { return w.seed002(ctx, o) },
		func() (table, error) { return w.seed003(ctx, o) },
		func() (table, error) { return w.seed004(ctx, o) },
	} {
		t, err := f()
		if err != nil {
			return tables, fmt.Errorf("seed %s: %w", t.seed, err)
		}
		tables = append(tables, t)
	}
	return tables, nil
}

// output prints the tables, or their measured figures as JSON rows.
func output(w io.Writer, tables []table, asJSON bool) error {
	if asJSON {
		var rows []benchrow.Row
		for _, t := range tables {
			rows = append(rows, t.benchRows()...)
		}
		return benchrow.Encode(w, rows)
	}
	for _, t := range tables {
		t.write(w)
	}
	return nil
}
