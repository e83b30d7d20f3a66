package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// TestInspectRecurrent: on PyTorch's export of an LSTM, a GRU and an RNN
// (onnxio/testdata/recurrent.py), inspect marks each op's W and R as binarization targets
// with channel_axis 1 (one index per gate row) and its B as a bias.
func TestInspectRecurrent(t *testing.T) {
	path := filepath.Join("..", "..", "onnxio", "testdata", "recurrent.onnx")
	out, code, err := runQtool(t, "inspect", "--json", path)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	targets, biases := 0, 0
	for _, ip := range rep.Params {
		switch {
		case ip.Target:
			targets++
			if ip.Role != "weight" || len(ip.Shape) != 3 || ip.ChannelAxis == nil || *ip.ChannelAxis != 1 {
				t.Errorf("%s %v: role %s, channel_axis %v; want a weight on axis 1", ip.Name, ip.Shape, ip.Role, ip.ChannelAxis)
			}
		case ip.Role == "bias":
			biases++
			if len(ip.Shape) != 2 {
				t.Errorf("%s %v is a bias but not a recurrent B [directions, 2·gates·hidden]", ip.Name, ip.Shape)
			}
		}
	}
	if targets != 6 || biases != 3 {
		t.Errorf("%d targets and %d biases, want W and R (6) and B (3) of LSTM, GRU and RNN", targets, biases)
	}
}
