package daemon

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/manad/manad/genl"
)

// TestBackendFillsEveryOp: the daemon answers every message, so ops() fills every op of
// genl.Backend, and the backend has a method of each op's name (a driver op added to
// genl.Backend with its method but without its line in ops() would answer EOPNOTSUPP, as for a
// driver without the callback).
func TestBackendFillsEveryOp(t *testing.T) {
	b := (*backend)(&Daemon{})
	ops := reflect.ValueOf(b.ops())
	methods := reflect.ValueOf(b)
	for i := range ops.NumField() {
		name := ops.Type().Field(i).Name
		f := ops.Field(i)
		if !assert.False(t, f.IsNil(), "genl.Backend.%s is not filled by ops()", name) {
			continue
		}
		assert.True(t, methods.MethodByName(name).IsValid(), "the daemon's backend has no method %s", name)
	}
	assert.Equal(t, reflect.TypeFor[genl.Backend](), ops.Type())
}
