package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/qtool/qtool/onnxio"
)

// TestInspectChannelAxis: on PyTorch's export of one layer per weight layout, whose
// weight values are 1 + the output channel autograd says they feed
// (onnxio/testdata/layers.py), inspect's channel_axis is the axis whose index is that
// channel, and it is absent for the grouped ConvTranspose, where no axis is.
func TestInspectChannelAxis(t *testing.T) {
	path := filepath.Join("..", "..", "onnxio", "testdata", "layers.onnx")
	out, code, err := runQtool(t, "inspect", "--json", path)
	if err != nil || code != 0 {
		t.Fatalf("exit %d: %v", code, err)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	m, err := onnxio.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	targets := 0
	for _, ip := range rep.Params {
		if !ip.Target {
			if ip.ChannelAxis != nil {
				t.Errorf("%s is kept but has channel_axis %d", ip.Name, *ip.ChannelAxis)
			}
			continue
		}
		targets++
		p, _ := m.Param(ip.Name)
		tt, err := m.Tensor(p.Tensor)
		if err != nil {
			t.Fatal(err)
		}
		on := -1
		for a := range tt.Dims {
			if valuesAreIndexPlusOne(tt, a) {
				on = a
			}
		}
		switch {
		case on < 0 && ip.ChannelAxis != nil:
			t.Errorf("%s: channel_axis %d, but no axis holds the output channels", ip.Name, *ip.ChannelAxis)
		case on >= 0 && (ip.ChannelAxis == nil || *ip.ChannelAxis != on):
			t.Errorf("%s: channel_axis %v, want %d", ip.Name, ip.ChannelAxis, on)
		}
	}
	if targets != 8 {
		t.Errorf("%d targets, want the fixture's 8 weights", targets)
	}
}

// valuesAreIndexPlusOne reports whether every value of t is 1 + its index along axis.
func valuesAreIndexPlusOne(t *onnxio.Tensor, axis int) bool {
	inner := 1
	for _, d := range t.Dims[axis+1:] {
		inner *= int(d)
	}
	for i, v := range t.Float {
		if v != float32((i/inner)%int(t.Dims[axis])+1) {
			return false
		}
	}
	return true
}
