// Package teardown keeps what a bench/ program set up — processes, network namespaces, links, a
// directory — and removes it on every way out: the normal end, a fatal error, or SIGINT, SIGTERM
// or SIGHUP (a benchmark interrupted with ^C or killed by a timeout), so that no namespace or
// daemon outlives the run.
package teardown

import (
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"
)

// List is what one run set up, in order. Its methods are safe for concurrent use; once Run has
// begun, adding blocks until the process exits, so nothing set up after it escapes it.
type List struct {
	mu    sync.Mutex
	procs []*exec.Cmd
	netns []string
	links []string
	dirs  []string
}

// Proc adds a started process: Run interrupts it and waits up to 10 seconds, then kills it.
func (l *List) Proc(c *exec.Cmd) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.procs = append(l.procs, c)
}

// LastProc returns the process added last, nil when there is none.
func (l *List) LastProc() *exec.Cmd {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.procs) == 0 {
		return nil
	}
	return l.procs[len(l.procs)-1]
}

// NetNS adds a named network namespace, before it is created (ip netns add), so that one being
// created when a signal arrives is deleted too.
func (l *List) NetNS(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.netns = append(l.netns, name)
}

// Link adds a link of the initial namespace (a TAP) that Run deletes.
func (l *List) Link(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.links = append(l.links, name)
}

// Dir adds a directory Run removes with everything in it.
func (l *List) Dir(path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dirs = append(l.dirs, path)
}

// Run removes everything added, processes first (newest first), then links, namespaces and
// directories, and forgets it: a second Run finds nothing. Errors are ignored, as what failed
// to go is most often already gone.
func (l *List) Run() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.run()
}

func (l *List) run() {
	for _, p := range slices.Backward(l.procs) {
		if p.Process == nil {
			continue
		}
		p.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.Process.Kill()
		}
	}
	for _, t := range l.links {
		exec.Command("ip", "link", "del", t).Run()
	}
	for _, n := range l.netns {
		exec.Command("ip", "netns", "del", n).Run()
	}
	for _, d := range l.dirs {
		os.RemoveAll(d)
	}
	l.procs, l.links, l.netns, l.dirs = nil, nil, nil, nil
}

// OnSignal makes SIGINT, SIGTERM and SIGHUP run the teardown and exit with 128 plus the signal's
// number, as a shell reports a process the signal killed. The returned function stops that.
func (l *List) OnSignal() (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	quit := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			l.mu.Lock() // held until the exit: nothing more is set up
			l.run()
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-quit:
		}
	}()
	return func() { signal.Stop(sig); close(quit) }
}
