package engine

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// resizeCase is one Resize or Upsample node on an input x of a given shape; its other
// inputs are initializers.
type resizeCase struct {
	name  string
	opset int64
	node  *onnxpb.NodeProto
	shape []int64
	inits []*onnxpb.TensorProto
}

// resizeCases covers every mode, coordinate transformation and input form, led by the
// ones exporters emit: PyTorch's F.interpolate nearest (asymmetric + floor) and bilinear
// (pytorch_half_pixel or half_pixel, and align_corners), TF's and Paddle's half_pixel,
// asymmetric and tf_crop_and_resize.
func resizeCases() []resizeCase {
	floats := func(name string, v ...float32) *onnxpb.TensorProto {
		return onnxio.FloatTensor(name, []int64{int64(len(v))}, v)
	}
	sc := func(v ...float32) []*onnxpb.TensorProto { return []*onnxpb.TensorProto{floats("sc", v...)} }
	sz := func(v ...int64) []*onnxpb.TensorProto { return []*onnxpb.TensorProto{ints("sz", v...)} }
	withScales := []string{"x", "", "sc"}
	withSizes := []string{"x", "", "", "sz"}
	y := []string{"y"}
	mode := func(m string) *onnxpb.AttributeProto { return attrS("mode", m) }
	ctm := func(m string) *onnxpb.AttributeProto { return attrS("coordinate_transformation_mode", m) }
	nm := func(m string) *onnxpb.AttributeProto { return attrS("nearest_mode", m) }
	img := []int64{2, 3, 4, 5}
	return []resizeCase{
		{"nearest/pytorch", 13, gNode("Resize", withScales, y, mode("nearest"), ctm("asymmetric"), nm("floor")), img, sc(1, 1, 2, 2)},
		{"nearest/pytorch-opset11", 11, gNode("Resize", []string{"x", "roi", "sc"}, y, mode("nearest"), ctm("asymmetric"), nm("floor")), img,
			[]*onnxpb.TensorProto{floats("roi"), floats("sc", 1, 1, 2, 3)}},
		{"nearest/pytorch-sizes", 13, gNode("Resize", withSizes, y, mode("nearest"), ctm("asymmetric"), nm("floor")), img, sz(2, 3, 7, 9)},
		{"nearest/half_pixel-round_prefer_floor-down", 13, gNode("Resize", withScales, y, mode("nearest")), img, sc(1, 1, 0.5, 0.6)},
		{"nearest/half_pixel-round_prefer_ceil", 13, gNode("Resize", withScales, y, mode("nearest"), nm("round_prefer_ceil")), img, sc(1, 1, 1.5, 2.5)},
		{"nearest/align_corners-ceil", 13, gNode("Resize", withSizes, y, mode("nearest"), ctm("align_corners"), nm("ceil")), img, sz(2, 3, 7, 3)},
		{"nearest/tf_half_pixel_for_nn", 11, gNode("Resize", []string{"x", "roi", "sc"}, y, mode("nearest"), ctm("tf_half_pixel_for_nn")), img,
			[]*onnxpb.TensorProto{floats("roi"), floats("sc", 1, 1, 1.5, 0.8)}},
		{"linear/pytorch_half_pixel", 13, gNode("Resize", withScales, y, mode("linear"), ctm("pytorch_half_pixel")), img, sc(1, 1, 2, 2)},
		{"linear/pytorch_half_pixel-sizes-to-1", 13, gNode("Resize", withSizes, y, mode("linear"), ctm("pytorch_half_pixel")), img, sz(2, 3, 1, 8)},
		{"linear/half_pixel", 13, gNode("Resize", withScales, y, mode("linear")), img, sc(1, 1, 2, 2)},
		{"linear/half_pixel-down", 13, gNode("Resize", withScales, y, mode("linear")), img, sc(1, 1, 0.5, 0.75)},
		{"linear/align_corners", 13, gNode("Resize", withScales, y, mode("linear"), ctm("align_corners")), img, sc(1, 1, 2, 2)},
		{"linear/align_corners-sizes", 13, gNode("Resize", withSizes, y, mode("linear"), ctm("align_corners")), img, sz(2, 3, 7, 3)},
		{"linear/asymmetric", 13, gNode("Resize", withScales, y, mode("linear"), ctm("asymmetric")), img, sc(1, 1, 1.5, 3)},
		{"linear/trilinear", 13, gNode("Resize", withScales, y, mode("linear")), []int64{1, 2, 3, 2, 4}, sc(1, 1, 2, 1.5, 2)},
		{"linear/1d", 13, gNode("Resize", withScales, y, mode("linear"), ctm("align_corners")), []int64{2, 3, 6}, sc(1, 1, 2)},
		{"linear/tf_crop_and_resize", 13, gNode("Resize", []string{"x", "roi", "", "sz"}, y, mode("linear"), ctm("tf_crop_and_resize"), attrF("extrapolation_value", 7)), img,
			[]*onnxpb.TensorProto{floats("roi", 0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3), ints("sz", 2, 3, 5, 6)}},
		{"nearest/tf_crop_and_resize", 13, gNode("Resize", []string{"x", "roi", "", "sz"}, y, mode("nearest"), ctm("tf_crop_and_resize")), img,
			[]*onnxpb.TensorProto{floats("roi", 0, 0, 0.2, -0.3, 1, 1, 0.7, 1.1), ints("sz", 2, 3, 3, 6)}},
		{"linear/half_pixel_symmetric", 19, gNode("Resize", withScales, y, mode("linear"), ctm("half_pixel_symmetric")), img, sc(1, 1, 1.7, 0.7)},
		// Positive axes: onnxruntime 1.30 ignores keep_aspect_ratio_policy with axis -1.
		{"linear/axes-not_larger", 18, gNode("Resize", withSizes, y, mode("linear"), attrInts("axes", 2, 3), attrS("keep_aspect_ratio_policy", "not_larger")), img, sz(7, 8)},
		{"nearest/axes-not_smaller", 18, gNode("Resize", withSizes, y, mode("nearest"), attrInts("axes", 3, 2), attrS("keep_aspect_ratio_policy", "not_smaller")), img, sz(7, 5)},
		{"linear/axes-negative", 18, gNode("Resize", withSizes, y, mode("linear"), attrInts("axes", -1)), img, sz(8)},
		{"linear/axes-scales", 18, gNode("Resize", withScales, y, mode("linear"), attrInts("axes", 2, 3)), img, sc(2, 1.5)},
		{"cubic/half_pixel", 13, gNode("Resize", withScales, y, mode("cubic")), img, sc(1, 1, 2, 1.5)},
		{"cubic/exclude_outside", 13, gNode("Resize", withScales, y, mode("cubic"), attrF("cubic_coeff_a", -0.5), attrI("exclude_outside", 1)), img, sc(1, 1, 0.8, 2)},
		{"cubic/align_corners-sizes", 13, gNode("Resize", withSizes, y, mode("cubic"), ctm("align_corners")), img, sz(2, 3, 6, 4)},
		{"cubic/pytorch_half_pixel", 13, gNode("Resize", withScales, y, mode("cubic"), ctm("pytorch_half_pixel")), img, sc(1, 1, 2, 2)},
		{"resize10/nearest", 10, gNode("Resize", []string{"x", "sc"}, y, mode("nearest")), img, sc(1, 1, 2, 0.6)},
		{"resize10/linear", 10, gNode("Resize", []string{"x", "sc"}, y, mode("linear")), img, sc(1, 1, 1.5, 2)},
		{"upsample9/nearest", 9, gNode("Upsample", []string{"x", "sc"}, y), img, sc(1, 1, 2, 3)},
		{"upsample9/linear", 9, gNode("Upsample", []string{"x", "sc"}, y, mode("linear")), img, sc(1, 1, 2, 2)},
		{"upsample7/nearest", 7, gNode("Upsample", []string{"x"}, y, attrFloats("scales", 1, 1, 2, 2)), img, nil},
		{"upsample7/linear", 7, gNode("Upsample", []string{"x"}, y, mode("linear"), attrFloats("scales", 1, 1, 1.5, 2)), img, nil},
	}
}

// TestResizeGradient checks the VJP of every mode and coordinate transformation by
// finite differences.
func TestResizeGradient(t *testing.T) {
	for _, c := range resizeCases() {
		t.Run(c.name, func(t *testing.T) {
			checkGraphGrad(t, gradCase{name: c.name, opset: c.opset, nodes: []*onnxpb.NodeProto{c.node},
				params: []gradParam{{name: "x", shape: c.shape}}, ints: c.inits, out: c.node.Output})
		})
	}
}

// TestResizeRefusals checks that what qtool does not support is refused with one line
// naming the node.
func TestResizeRefusals(t *testing.T) {
	x := []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, 1, 1, 4, 4)}
	sc := onnxio.FloatTensor("sc", []int64{4}, []float32{1, 1, 0.5, 0.5})
	for _, c := range []struct {
		opset int64
		node  *onnxpb.NodeProto
	}{
		{18, gNode("Resize", []string{"x", "", "sc"}, []string{"y"}, attrS("mode", "linear"), attrI("antialias", 1))},
		{13, gNode("Resize", []string{"x", "", "sc"}, []string{"y"}, attrS("mode", "area"))},
		{13, gNode("Resize", []string{"x", "", "sc"}, []string{"y"}, attrS("coordinate_transformation_mode", "tf_half_pixel_for_nn"))},
	} {
		c.node.Name = proto.String("rs")
		_, err := Build(gModel(c.opset, []*onnxpb.NodeProto{c.node}, x, []string{"y"}, sc), Options{})
		if err == nil {
			t.Errorf("%v accepted", c.node.GetAttribute())
			continue
		}
		t.Log(err)
	}
}
