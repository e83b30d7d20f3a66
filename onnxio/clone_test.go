package onnxio_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// TestCloneIsDeep: the clone equals the original, and editing the clone's graph and
// tensors leaves the original untouched.
func TestCloneIsDeep(t *testing.T) {
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "dir")
	if err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(m.Proto)
	c := m.Clone()
	if c.Name != m.Name || c.Dir != m.Dir || !proto.Equal(c.Proto, m.Proto) {
		t.Fatal("clone differs from the original")
	}
	init := c.Proto.GetGraph().GetInitializer()[0]
	init.RawData[0] ^= 0xff
	init.Name = proto.String("changed")
	c.Proto.GetGraph().Node = c.Proto.GetGraph().Node[:1]
	if !proto.Equal(m.Proto, want) {
		t.Fatal("editing the clone changed the original")
	}
}
