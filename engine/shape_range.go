package engine

import (
	"math"
)

// rangeKernel is ONNX Range: start, start+delta, … up to but excluding limit, in the
// inputs' type (int64, or float32). Its length depends on the values, so they must be
// known when the graph is planned; exporters compute them from constants and shapes,
// which the executor folds per batch size, and Range then folds too.
type rangeKernel struct{ n *Node }

func buildRange(n *Node) (Kernel, error) { return &rangeKernel{n: n}, nil }

// count returns the output length max(ceil((limit-start)/delta), 0), from inputs that
// Infer has checked.
func (k *rangeKernel) count(in []*Tensor) (int, error) {
	var n float64
	if in[0].DType == Int64 {
		s, l, d := in[0].I[0], in[1].I[0], in[2].I[0]
		if d == 0 {
			return 0, k.n.Errorf("delta is 0")
		}
		// Integer ceiling division, exact where a float64 quotient would round.
		q, r := (l-s)/d, (l-s)%d
		if r != 0 && (r > 0) == (d > 0) {
			q++
		}
		return int(max(q, 0)), nil
	}
	s, l, d := float64(in[0].F[0]), float64(in[1].F[0]), float64(in[2].F[0])
	if d == 0 {
		return 0, k.n.Errorf("delta is 0")
	}
	n = math.Ceil((l - s) / d)
	if math.IsNaN(n) || n > math.MaxInt32 {
		return 0, k.n.Errorf("range from %g to %g by %g has no finite length qtool can hold", s, l, d)
	}
	return int(max(n, 0)), nil
}

func (k *rangeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	dt := in[0].DType
	for i, name := range []string{"start", "limit", "delta"} {
		if in[i].DType != dt || in[i].Len() != 1 {
			return nil, k.n.Errorf("%s must be a scalar of the same type as start, got %s %v", name, in[i].DType, in[i].Shape)
		}
		if !in[i].Known() {
			return nil, k.n.Errorf("%s must be known before running (a constant, or computed from shapes), since it decides the output's length", name)
		}
	}
	n, err := k.count(in)
	if err != nil {
		return nil, err
	}
	return []*Tensor{{DType: dt, Shape: []int{n}}}, nil
}

// Forward writes start + i·delta (the ONNX definition, not a running sum, so that error
// does not accumulate along the range).
func (k *rangeKernel) Forward(_ *Context, in, out []*Tensor) error {
	// Float inputs that are parameters are read when planning but not folded, since an
	// optimizer could change them; a change of length would not fit the planned output.
	if n, err := k.count(in); err != nil || n != out[0].Len() {
		return k.n.Errorf("start, limit and delta changed since planning; the output's length must stay %d", out[0].Len())
	}
	if in[0].DType == Int64 {
		s, d := in[0].I[0], in[2].I[0]
		for i := range out[0].I {
			out[0].I[i] = s + int64(i)*d
		}
		return nil
	}
	s, d := in[0].F[0], in[2].F[0]
	for i := range out[0].F {
		out[0].F[i] = s + float32(i)*d
	}
	return nil
}

// sizeKernel returns its input's element count as an int64 scalar; like Shape, the value
// is known from the shape alone.
type sizeKernel struct{ n *Node }

func buildSize(n *Node) (Kernel, error) { return &sizeKernel{n: n}, nil }

func (k *sizeKernel) Infer(in []*Tensor) ([]*Tensor, error) {
	return []*Tensor{NewInt([]int{}, []int64{int64(in[0].Len())})}, nil
}

func (k *sizeKernel) Forward(_ *Context, in, out []*Tensor) error {
	out[0].I[0] = int64(in[0].Len())
	return nil
}
