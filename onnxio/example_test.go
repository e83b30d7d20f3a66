package onnxio_test

import (
	"fmt"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/testmodels"
)

// Parse a model held in memory, here the embedded fmnist-mlp, and list its parameters
// with the role binarization gives each: the weights of the linear layers are targeted,
// with the axis their output channels lie along; biases and normalisation parameters stay
// in full precision.
func Example() {
	m, err := onnxio.Parse(testmodels.FMNISTMLP, "fmnist-mlp.onnx", "")
	if err != nil {
		panic(err)
	}
	roles := m.ParamRoles()
	for _, p := range m.Params() {
		c := roles[p.Name]
		line := fmt.Sprintf("%-24s %-10s %s", p.Name, fmt.Sprint(p.Tensor.GetDims()), c.Role)
		if c.Role == onnxio.RoleWeight {
			axis, err := c.Use.ChannelAxis(p.Tensor.GetDims())
			if err != nil {
				panic(err)
			}
			line += fmt.Sprintf(": input %d of %s, output channels on axis %d", c.Use.Input, c.Use.Node.GetOpType(), axis)
		}
		fmt.Println(line)
	}
	// Output:
	// fc1.weight               [256 784]  weight: input 1 of Gemm, output channels on axis 0
	// fc1.bias                 [256]      bias
	// bn1.weight               [256]      normalization
	// bn1.bias                 [256]      normalization
	// bn1.running_mean         [256]      normalization
	// bn1.running_var          [256]      normalization
	// fc2.weight               [256 256]  weight: input 1 of Gemm, output channels on axis 0
	// fc2.bias                 [256]      bias
	// bn2.weight               [256]      normalization
	// bn2.bias                 [256]      normalization
	// bn2.running_mean         [256]      normalization
	// bn2.running_var          [256]      normalization
	// fc3.weight               [256 256]  weight: input 1 of Gemm, output channels on axis 0
	// fc3.bias                 [256]      bias
	// bn3.weight               [256]      normalization
	// bn3.bias                 [256]      normalization
	// bn3.running_mean         [256]      normalization
	// bn3.running_var          [256]      normalization
	// fc4.weight               [10 256]   weight: input 1 of Gemm, output channels on axis 0
	// fc4.bias                 [10]       bias
	// bn4.weight               [10]       normalization
	// bn4.bias                 [10]       normalization
	// bn4.running_mean         [10]       normalization
	// bn4.running_var          [10]       normalization
	// /drop0/Constant_output_0 []         other
	// /drop1/Constant_output_0 []         other
	// /drop2/Constant_output_0 []         other
	// /drop3/Constant_output_0 []         other
}

// The layer schema says which inputs of each linear operator hold weights (when they are
// parameters) and which the bias.
func ExampleLayers() {
	for _, l := range onnxio.Layers() {
		if l.Linear() {
			fmt.Printf("%-13s weights %v, bias %v\n", l.Op, l.Inputs(onnxio.RoleWeight), l.Inputs(onnxio.RoleBias))
		}
	}
	// Output:
	// Conv          weights [1], bias [2]
	// ConvTranspose weights [1], bias [2]
	// Gemm          weights [0 1], bias [2]
	// MatMul        weights [0 1], bias []
	// LSTM          weights [1 2], bias [3]
	// GRU           weights [1 2], bias [3]
	// RNN           weights [1 2], bias [3]
}
