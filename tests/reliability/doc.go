// Package reliability holds manad's reliability and security tests (issue 6): load from many
// concurrent clients during traffic, every fault-injection point under traffic, kill -9 during
// reconfiguration, malformed and mutated netlink input from a raw socket, invalid configuration
// and eBPF objects, and the rights and namespace scoping of the control socket.
//
// The tests run the real manad (the binary, and in one test the daemon package in-process so
// that goroutine leaks can be checked with goleak) in network namespaces, as root; they skip
// for other users and fail in CI (CI=true) instead of skipping. Names carry the test process's
// PID, so several runs can share a machine.
package reliability
