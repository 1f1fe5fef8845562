// Package benchrow is the one JSON row format that bench/ programs print under -json and that
// bench/report reads: a figure over rounds (median, min, max), its same-run peer and the ratio
// between them.
package benchrow

import (
	"encoding/json"
	"io"
	"slices"
)

// Row is one JSON object a bench/ program prints under -json. Value, Min and Max are the median
// and the extremes over Rounds; Ratio (with RatioMin, RatioMax) is the median of the per-round
// ratios to Baseline, the peer's median, named by BaselineName. Offered is the sender's median
// rate; SenderBound is set when the path delivered about all of what was offered (the sender,
// not the path, was the limit), PeerSenderBound when the peer was.
type Row struct {
	Issue           int     `json:"issue"`
	Figure          string  `json:"figure"`
	Value           float64 `json:"value"`
	Min             float64 `json:"min"`
	Max             float64 `json:"max"`
	Rounds          int     `json:"rounds"`
	Unit            string  `json:"unit"`
	Baseline        float64 `json:"baseline,omitempty"`
	BaselineName    string  `json:"baseline_name,omitempty"`
	Ratio           float64 `json:"ratio,omitempty"`
	RatioMin        float64 `json:"ratio_min,omitempty"`
	RatioMax        float64 `json:"ratio_max,omitempty"`
	Offered         float64 `json:"offered,omitempty"`
	SenderBound     bool    `json:"sender_bound,omitempty"`
	PeerSenderBound bool    `json:"peer_sender_bound,omitempty"`
	Target          string  `json:"target,omitempty"`
}

// TargetAtMostBaseline is a Row's Target for a figure that must not exceed its peer's (e.g.
// retransmits): the report says "≤ <BaselineName>'s" and whether Value ≤ Baseline.
const TargetAtMostBaseline = "≤ baseline"

// Stat is a figure over rounds.
type Stat struct{ Median, Min, Max float64 }

// StatOf returns the median (the upper one of an even count), min and max of v; the zero Stat
// for an empty v.
func StatOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Stat{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

// Encode writes rows as JSON lines. Errors: those of w.
func Encode(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
