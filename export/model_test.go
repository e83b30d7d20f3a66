package export

import (
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

func cloneModel(m *onnxio.Model) *onnxio.Model {
	return &onnxio.Model{Proto: proto.Clone(m.Proto).(*onnxpb.ModelProto), Name: m.Name, Dir: m.Dir}
}
