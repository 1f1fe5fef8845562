package jsonobj

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestObject(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   [][2]string
		want string
	}{
		{"empty", nil, `{}`},
		{"one", [][2]string{{"a", `1`}}, `{"a":1}`},
		{"order kept", [][2]string{{"z", `"x"`}, {"a", `[1,2]`}, {"m", `{"k":null}`}}, `{"z":"x","a":[1,2],"m":{"k":null}}`},
		{"key escaped", [][2]string{{`q"<`, `true`}}, `{"q\"\u003c":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o Object
			for _, kv := range tc.kv {
				o.Add(kv[0], json.RawMessage(kv[1]))
			}
			got := o.Bytes()
			assert.Equal(t, tc.want, string(got))
			assert.True(t, json.Valid(got))
			assert.Equal(t, string(got), string(o.Bytes()), "Bytes twice")
			var m map[string]any
			require.NoError(t, json.Unmarshal(got, &m))
			assert.Len(t, m, len(tc.kv))
		})
	}
}
