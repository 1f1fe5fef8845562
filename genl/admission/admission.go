// Package admission holds the defaults of manad's control-socket admission: how many
// connections the server serves at once, how many of them one unprivileged uid may hold, and how
// long an idle one is kept. The server (package genl) applies them to a zero ServerConfig field,
// and the configuration (daemon/config) fills its [daemon] keys with them, so both read the one
// definition without the configuration linking the server.
package admission

import "time"

// Defaults of genl.ServerConfig's MaxConns, MaxConnsPerUID and IdleTimeout, and of the [daemon]
// keys max_connections, max_connections_per_uid and idle_timeout.
const (
	DefaultMaxConns       = 256
	DefaultMaxConnsPerUID = 32
	DefaultIdleTimeout    = 5 * time.Minute
)
