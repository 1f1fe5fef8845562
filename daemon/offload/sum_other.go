//go:build !amd64

package offload

// sumVector is sum_amd64.go's; elsewhere everything is summed in Go.
func sumVector(b []byte) (uint64, int) { return 0, 0 }
