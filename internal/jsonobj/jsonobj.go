// Package jsonobj writes a JSON object whose keys keep the order they are added in, which
// encoding/json does not do for a map (it sorts the keys): the state file's port specs and
// manactl's port JSON list their keys in their schema's order, so that they read as the tables
// do. Written here rather than taken from an ordered-map module: it is one loop, and both users
// already hold their values as json.RawMessage.
package jsonobj

import (
	"bytes"
	"encoding/json"
)

// Object is a JSON object being written. The zero value is an empty object.
type Object struct{ b bytes.Buffer }

// Add appends key with its already encoded value raw (which must be valid JSON).
func (o *Object) Add(key string, raw json.RawMessage) {
	if o.b.Len() == 0 {
		o.b.WriteByte('{')
	} else {
		o.b.WriteByte(',')
	}
	k, _ := json.Marshal(key) // a string always encodes
	o.b.Write(k)
	o.b.WriteByte(':')
	o.b.Write(raw)
}

// Bytes returns the object: "{}" when nothing was added.
func (o *Object) Bytes() []byte {
	if o.b.Len() == 0 {
		return []byte("{}")
	}
	return append(bytes.Clone(o.b.Bytes()), '}')
}
