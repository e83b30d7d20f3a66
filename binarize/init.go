package binarize

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// Init names where the weights of a run come from.
type Init string

// The inits.
const (
	// InitModel keeps the model's weights (pretrained, usually).
	InitModel Init = "model"
	// InitRandom re-initialises them as PyTorch's defaults do (RandomInit), for the
	// paper's experiments without pre-training: the ONNX file supplies the architecture.
	InitRandom Init = "random"
)

// Initialized records what RandomInit did to one parameter.
type Initialized struct {
	Name string
	// Kind is "weight" or "bias" (drawn from U(−Bound, Bound)), "constant" (set to
	// Value), or "kept" (left as it was: no PyTorch default applies, or its layer's fan_in
	// could not be found).
	Kind  string
	FanIn int
	Bound float64
	Value float64
}

// InitError reports a parameter RandomInit cannot re-initialise.
type InitError struct {
	Param, Reason string
}

func (e *InitError) Error() string {
	return fmt.Sprintf("binarize: random init of %s: %s", e.Param, e.Reason)
}

// RandomInit returns a copy of m whose float parameters are re-initialised as PyTorch's
// reset_parameters does, and what it did to each parameter:
//
//   - weights of Conv, ConvTranspose, Gemm and MatMul: kaiming_uniform(a = √5), which is
//     U(±1/√fan_in), with fan_in as torch.nn.init._calculate_fan_in_and_fan_out computes
//     it on PyTorch's layout (for ConvTranspose that is C_out/group·k, PyTorch's choice);
//   - their biases (also a MatMul's bias added by Add): U(±1/√fan_in) of the layer's weight;
//   - LSTM, GRU and RNN weights and biases: U(±1/√hidden_size);
//   - BatchNormalization: scale 1, shift 0, running mean 0, running variance 1;
//     InstanceNormalization and LayerNormalization: scale 1, shift 0.
//
// Other parameters (shapes, clip bounds, embeddings) are kept. The values cannot be
// PyTorch's, whose generator differs; the distributions are. Each parameter draws from its
// own stream, seeded by seed and its name, so a model's other parameters do not change a
// parameter's values. m is not modified.
func RandomInit(m *onnxio.Model, seed uint64) (*onnxio.Model, []Initialized, error) {
	out := m.Clone()
	roles := out.ParamRoles()
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range out.Proto.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	dims := map[string][]int64{}
	for _, p := range out.Params() {
		dims[p.Name] = p.Tensor.GetDims()
	}
	var recs []Initialized
	for _, p := range out.Params() {
		rec := Initialized{Name: p.Name, Kind: "kept"}
		if p.Tensor.GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
			recs = append(recs, rec)
			continue
		}
		c := roles[p.Name]
		n := c.Use.Node
		switch c.Role {
		case onnxio.RoleWeight:
			if h, ok := hiddenSize(n); ok {
				rec.Kind, rec.FanIn = "weight", h
			} else if f := fanIn(n, c.Use.Input, p.Tensor.GetDims()); f > 0 {
				rec.Kind, rec.FanIn = "weight", f
			}
		case onnxio.RoleBias:
			if h, ok := hiddenSize(n); ok {
				rec.Kind, rec.FanIn = "bias", h
			} else if w, in := biasWeight(n, c.Use.Input, roles, producer); w != "" {
				if f := fanIn(producerOrSelf(n, w, producer), in, dims[w]); f > 0 {
					rec.Kind, rec.FanIn = "bias", f
				}
			}
		case onnxio.RoleNorm:
			if v, ok := normValue(n.GetOpType(), c.Use.Input); ok {
				rec.Kind, rec.Value = "constant", v
			}
		}
		if rec.Kind == "kept" {
			recs = append(recs, rec)
			continue
		}
		t, err := out.Tensor(p.Tensor)
		if err != nil {
			return nil, nil, &InitError{Param: p.Name, Reason: err.Error()}
		}
		vals := make([]float32, t.Len())
		if rec.Kind == "constant" {
			for i := range vals {
				vals[i] = float32(rec.Value)
			}
		} else {
			rec.Bound = 1 / math.Sqrt(float64(rec.FanIn))
			h := fnv.New64a()
			h.Write([]byte(p.Name))
			r := rand.New(rand.NewPCG(seed, h.Sum64()))
			for i := range vals {
				vals[i] = float32((2*r.Float64() - 1) * rec.Bound)
			}
		}
		if err := out.SetParam(p.Name, onnxio.FloatTensor(p.Name, p.Tensor.GetDims(), vals)); err != nil {
			return nil, nil, &InitError{Param: p.Name, Reason: err.Error()}
		}
		recs = append(recs, rec)
	}
	return out, recs, nil
}

// fanIn is PyTorch's fan_in of the weight read as input of n, from the ONNX layout:
// size(1)·∏size(2:) of PyTorch's weight, which is [out, in/group, k...] for Conv and
// [in, out/group, k...] for ConvTranspose, as ONNX stores them; a Linear layer's input
// features for Gemm and MatMul, wherever transA/transB put them. 0 when unknown.
func fanIn(n *onnxpb.NodeProto, input int, d []int64) int {
	if n == nil || len(d) == 0 {
		return 0
	}
	attr := func(name string) int64 {
		for _, a := range n.GetAttribute() {
			if a.GetName() == name {
				return a.GetI()
			}
		}
		return 0
	}
	switch n.GetOpType() {
	case "Conv", "ConvTranspose":
		if len(d) < 2 {
			return 0
		}
		f := d[1]
		for _, k := range d[2:] {
			f *= k
		}
		return int(f)
	case "Gemm":
		if len(d) != 2 {
			return 0
		}
		// Y = A'·B': B' is [K, N] and A' is [M, K]; the weight's K is the fan_in.
		if input == 1 {
			if attr("transB") != 0 {
				return int(d[1])
			}
			return int(d[0])
		}
		if attr("transA") != 0 {
			return int(d[0])
		}
		return int(d[1])
	case "MatMul":
		if len(d) < 2 {
			return 0
		}
		if input == 1 {
			return int(d[len(d)-2])
		}
		return int(d[len(d)-1])
	}
	return 0
}

// biasWeight returns the weight whose fan_in bounds the bias read as input of n, and the
// input the weight is read as: input 1 of Conv, ConvTranspose and Gemm, or the weight of
// the Conv, Gemm or MatMul whose output an Add adds the bias to.
func biasWeight(n *onnxpb.NodeProto, input int, roles map[string]onnxio.Classification, producer map[string]*onnxpb.NodeProto) (string, int) {
	switch n.GetOpType() {
	case "Conv", "ConvTranspose", "Gemm":
		if len(n.GetInput()) > 1 {
			return n.GetInput()[1], 1
		}
	case "Add":
		if len(n.GetInput()) != 2 {
			return "", 0
		}
		lin := producer[n.GetInput()[1-input]]
		if lin == nil {
			return "", 0
		}
		for i, in := range lin.GetInput() {
			if roles[in].Role == onnxio.RoleWeight && roles[in].Use.Node == lin {
				return in, i
			}
		}
	}
	return "", 0
}

// producerOrSelf is the node that reads weight w: n itself, or the linear node an Add
// adds n's bias to.
func producerOrSelf(n *onnxpb.NodeProto, w string, producer map[string]*onnxpb.NodeProto) *onnxpb.NodeProto {
	if n.GetOpType() != "Add" {
		return n
	}
	for _, in := range n.GetInput() {
		if p := producer[in]; p != nil {
			for _, pin := range p.GetInput() {
				if pin == w {
					return p
				}
			}
		}
	}
	return nil
}

// hiddenSize is the hidden_size of a recurrent node, whose every weight and bias PyTorch
// draws from U(±1/√hidden_size).
func hiddenSize(n *onnxpb.NodeProto) (int, bool) {
	switch n.GetOpType() {
	case "LSTM", "GRU", "RNN":
		for _, a := range n.GetAttribute() {
			if a.GetName() == "hidden_size" && a.GetI() > 0 {
				return int(a.GetI()), true
			}
		}
	}
	return 0, false
}

// normValue is the constant PyTorch starts input of a normalisation at.
func normValue(op string, input int) (float64, bool) {
	switch op {
	case "BatchNormalization":
		switch input {
		case 1, 4:
			return 1, true
		case 2, 3:
			return 0, true
		}
	case "InstanceNormalization", "LayerNormalization":
		switch input {
		case 1:
			return 1, true
		case 2:
			return 0, true
		}
	}
	return 0, false
}
