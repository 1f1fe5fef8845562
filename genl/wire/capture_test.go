package wire_test

import (
	"testing"

	"github.com/manad/manad/genl/nlattr"
	"github.com/manad/manad/genl/wire"
	"github.com/stretchr/testify/require"
)

// TestCaptureTablesRoundTrip: every field of the capture structs survives Put and Decode.
func TestCaptureTablesRoundTrip(t *testing.T) {
	roundTrip(t, "CaptureRequest", wire.CaptureRequestTable)
	roundTrip(t, "CaptureInfo", wire.CaptureInfoTable)
	roundTrip(t, "CaptureFrame", wire.CaptureFrameTable)
	roundTrip(t, "CaptureStats", wire.CaptureStatsTable)
}

// TestCaptureFrameDataCopied: a decoded frame owns its bytes, so the datagram buffer it came in
// can be reused for the next read.
func TestCaptureFrameDataCopied(t *testing.T) {
	var b nlattr.Builder
	wire.CaptureFrameTable.Put(&b, &wire.CaptureFrame{OrigLen: 3, Data: []byte{1, 2, 3}})
	var f wire.CaptureFrame
	require.NoError(t, wire.CaptureFrameTable.Decode(b.B, &f))
	clear(b.B)
	if len(f.Data) != 3 || f.Data[0] != 1 || f.Data[2] != 3 {
		t.Errorf("decoded data %v changed with the message buffer", f.Data)
	}
}
