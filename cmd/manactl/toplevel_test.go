package main

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTopLevelCommands: every exported method of topLevel is a top-level command of the root,
// each with its own name (two constructors returning one name would shadow each other in cobra),
// and the root has no top-level command of its own besides cobra's help and completion.
func TestTopLevelCommands(t *testing.T) {
	root := newRoot(&app{}, func(string) string { return "" })
	methods := reflect.TypeFor[topLevel]().NumMethod()
	require.Greater(t, methods, 20, "topLevel's commands")

	names := map[string]bool{}
	for _, c := range (topLevel{&app{}}).commands() {
		require.NotEmpty(t, c.Name())
		assert.False(t, names[c.Name()], "two topLevel methods make %q", c.Name())
		names[c.Name()] = true
	}
	assert.Len(t, names, methods)
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		assert.True(t, names[c.Name()], "root command %q does not come from topLevel", c.Name())
		delete(names, c.Name())
	}
	assert.Empty(t, names, "topLevel commands missing from the root")
}
