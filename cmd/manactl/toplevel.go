package main

import (
	"fmt"
	"reflect"

	"github.com/spf13/cobra"
)

// topLevel's exported methods are manactl's top-level commands, each declared in its command's
// file next to the command's constructor (func (t topLevel) ShowRing() *cobra.Command), so that
// adding a command touches only its own file, as genl's families are built from their message
// types' methods. A method set rather than a hand list in the root, or an init() that registers
// into a package variable: the compiler refuses two methods of one name, and nothing else names
// the command.
type topLevel struct{ *app }

// commands calls every exported method of t that takes nothing and returns a *cobra.Command, in
// the method set's (name) order; cobra sorts them for help anyway. It panics on a method of
// another signature: a programming error every test that builds the root command finds.
func (t topLevel) commands() []*cobra.Command {
	v := reflect.ValueOf(t)
	want := reflect.TypeFor[func() *cobra.Command]()
	var cmds []*cobra.Command
	for i := range v.NumMethod() {
		m := v.Method(i)
		if m.Type() != want {
			panic(fmt.Sprintf("manactl: topLevel.%s is not a command constructor (func() *cobra.Command)", v.Type().Method(i).Name))
		}
		cmds = append(cmds, m.Interface().(func() *cobra.Command)())
	}
	return cmds
}
