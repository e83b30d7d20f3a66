package calib

import (
	"archive/zip"
	"fmt"
	"os"
	"slices"
)

// Models with several inputs (a recurrent voice-activity detector takes audio, a state and
// a sample rate) read every input but the first from the .npz array named after it. These
// arrays are small next to the data (a state, a scalar), so calib holds them in memory.
//
// The batch axis of such an input is where its samples are stacked:
//
//  1. Options.BatchAxes[name] when set (-1: the input has none);
//  2. else the first axis the model declares symbolic (-1);
//  3. else, for a model whose first input declares a fixed batch B (Input.Batch), the first
//     axis the model declares as B;
//  4. else none: the input has no batch axis.
//
// For an input the model declares no shape for, axis 0 is the batch axis when the array
// holds one entry per sample there, and otherwise there is none.
//
// An input without a batch axis (a scalar sample rate, a tensor with no dynamic dimension)
// is taken as stored and given unchanged to every batch. An input with one holds either one
// entry per sample along that axis, or a single entry (size 1) that every sample shares.

// ExtraInput describes a model input other than the first, as read from the data.
type ExtraInput struct {
	// Name is the model input's name, and the name of its .npz array.
	Name string
	// Shape is the array's shape as stored.
	Shape []int64
	// Axis is the batch axis of Shape, or -1 when the whole array goes to every batch.
	Axis int
	// Shared reports an array whose batch axis has size 1, shared by every sample.
	Shared bool
	// Int64 reports int64 values (the model takes int64); otherwise float32.
	Int64 bool
}

// extra is an ExtraInput and its values, held in memory.
type extra struct {
	ExtraInput
	f []float32
	i []int64
}

// ExtraInputs returns the inputs d feeds besides the first (Options.Inputs), in the order of
// Options.Inputs; nil for a single-input model.
func ExtraInputs(d Dataset) []ExtraInput {
	es, _ := extrasOf(d, nil)
	r := make([]ExtraInput, len(es))
	for k, e := range es {
		r[k] = e.ExtraInput
		r[k].Shape = slices.Clone(e.Shape)
	}
	return r
}

// extrasOf returns d's extra inputs and idx mapped to the indices of the data set holding
// them, through views.
func extrasOf(d Dataset, idx []int) ([]*extra, []int) {
	switch v := d.(type) {
	case *set:
		return v.extras, idx
	case *view:
		m := make([]int, len(idx))
		for k, i := range idx {
			m[k] = v.idx[i]
		}
		return extrasOf(v.d, m)
	}
	return nil, nil
}

// undeclared is batchAxis's answer for an input the model declares no shape for.
const undeclared = -2

// batchAxis applies the rule above to the declared shape of input in.
func batchAxis(in Input, primaryBatch int64, o *Options) int {
	if a, ok := o.BatchAxes[in.Name]; ok {
		return a
	}
	if in.Shape == nil {
		return undeclared
	}
	for a, d := range in.Shape {
		if d < 0 {
			return a
		}
	}
	if primaryBatch > 0 {
		for a, d := range in.Shape {
			if d == primaryBatch {
				return a
			}
		}
	}
	return -1
}

// readExtras reads Options.Inputs from the archive for n samples.
func readExtras(f *os.File, path string, member func(string) *zip.File, keys string, primary Input, n int, o *Options) ([]*extra, error) {
	var es []*extra
	for _, in := range o.Inputs {
		m := member(in.Name)
		if m == nil {
			return nil, &InputError{File: path, Input: in.Name, Reason: fmt.Sprintf("the model takes an input %q but the archive has no array of that name (it has %s): add one, batch axis as the model declares it %s, or one value for every sample", in.Name, keys, shapeString(in.Shape))}
		}
		a, c, err := npzArray(f, path, m)
		if err != nil {
			return nil, err
		}
		e, err := readExtra(a, in, primary, n, o)
		c.Close()
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, nil
}

func readExtra(a *npyArray, in Input, primary Input, n int, o *Options) (*extra, error) {
	h := a.h
	dims := h.dims
	count, ok := prodDims(dims)
	if len(dims) == 0 {
		count, ok = 1, true
	}
	if !ok {
		return nil, fmt.Errorf("%s: shape %v holds no data or is too large", a.name, dims)
	}
	want := count * int64(h.dt.size())
	if want > o.maxMemory() {
		return nil, &OptionError{Option: "MaxMemory", File: a.name, Reason: fmt.Sprintf("input %q holds %d bytes, more than Options.MaxMemory; calib keeps the inputs after the first in memory", in.Name, want)}
	}
	mem, _, _, err := loadPayload(a.r, a.name, h.length, want, a.avail, want)
	if err != nil {
		return nil, err
	}
	if h.fortran && len(dims) > 1 {
		mem = fortranToC(mem, dims, h.dt.size())
	}
	e := &extra{ExtraInput: ExtraInput{Name: in.Name, Shape: toInt64(dims), Axis: batchAxis(in, primary.Batch, o), Int64: in.Int64}}
	if e.Axis == undeclared {
		// Nothing declared: samples stacked first, as for the data input, when the
		// array has an entry per sample there.
		e.Axis = -1
		if len(dims) > 0 && dims[0] == n {
			e.Axis = 0
		}
	}
	if e.Axis >= len(dims) || e.Axis < -1 {
		return nil, &ShapeError{File: a.name, Input: in.Name, Want: in.Shape, Got: dims,
			Reason: fmt.Sprintf("input %q has batch axis %d but %s has shape %v", in.Name, e.Axis, a.name, dims)}
	}
	if e.Axis >= 0 {
		switch dims[e.Axis] {
		case n:
		case 1:
			e.Shared = true
		default:
			return nil, &ShapeError{File: a.name, Input: in.Name, Want: in.Shape, Got: dims,
				Reason: fmt.Sprintf("%s has shape %v: input %q stacks its samples on axis %d, which holds %d entries for %d samples (want %d, or 1 for an entry every sample shares); Options.BatchAxes sets another axis", a.name, dims, in.Name, e.Axis, dims[e.Axis], n, n)}
		}
	}
	// The model's fixed dimensions must hold, apart from the batch axis.
	if in.Shape != nil {
		fits := len(in.Shape) == len(dims)
		for k := 0; fits && k < len(dims); k++ {
			fits = k == e.Axis || in.Shape[k] < 0 || in.Shape[k] == int64(dims[k])
		}
		if !fits {
			return nil, &ShapeError{File: a.name, Input: in.Name, Want: in.Shape, Got: dims,
				Reason: fmt.Sprintf("%s has shape %v but model input %q is declared %s", a.name, dims, in.Name, shapeString(in.Shape))}
		}
	}
	if e.Int64 {
		if !(h.dt == u8 || h.dt == i8 || h.dt == i16 || h.dt == i32 || h.dt == i64) {
			return nil, fmt.Errorf("%s: model input %q takes int64 values but the array holds %s", a.name, in.Name, h.dt)
		}
		e.i = make([]int64, count)
		es := h.dt.size()
		for k := range e.i {
			e.i[k], _ = decodeInt(mem[k*es:], h.dt, h.bo)
		}
		return e, nil
	}
	e.f = make([]float32, count)
	decode(e.f, mem, h.dt, h.bo)
	return e, nil
}

// batchShape is e's shape in a batch of b samples.
func (e *extra) batchShape(b int) []int64 {
	s := slices.Clone(e.Shape)
	if e.Axis >= 0 {
		s[e.Axis] = int64(b)
	}
	return s
}

// gather writes the entries of samples idx along e's batch axis into f or i (sized for
// len(idx) samples); an input without a batch axis is copied whole.
func (e *extra) gather(idx []int, f []float32, i []int64) {
	if e.Axis < 0 {
		copy(f, e.f)
		copy(i, e.i)
		return
	}
	outer, inner := 1, 1
	for k, d := range e.Shape {
		if k < e.Axis {
			outer *= int(d)
		} else if k > e.Axis {
			inner *= int(d)
		}
	}
	stored := int(e.Shape[e.Axis])
	for o := range outer {
		for k, s := range idx {
			if e.Shared {
				s = 0
			}
			src := (o*stored + s) * inner
			dst := (o*len(idx) + k) * inner
			if e.Int64 {
				copy(i[dst:dst+inner], e.i[src:src+inner])
			} else {
				copy(f[dst:dst+inner], e.f[src:src+inner])
			}
		}
	}
}
