package engine

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// maxElems bounds the product of a shape's dimensions (zeros counted as ones), so that
// every partial product a kernel forms, and every byte count, fits in an int64. Bigger
// shapes only come from broken or hostile models.
const maxElems = math.MaxInt64 / 16

// MemoryError reports a tensor or a plan that does not fit: a shape whose size overflows,
// a tensor larger than the memory limit (Options.MaxBytes), or a plan whose buffers add up
// to more than it. It is returned before anything is allocated.
type MemoryError struct {
	Model string
	// Node and Op name the node whose output (or, in a backward plan, input gradient)
	// needs the memory; for a graph input Node is empty and Input names it.
	Node, Op string
	Input    string
	// Shape is the tensor's shape.
	Shape []int
	// Bytes is what the tensor needs or, with Total, what the plan needs up to and with
	// it; -1 when the shape's size overflows.
	Bytes int64
	// Limit is the memory limit in bytes.
	Limit int64
	// Total reports that the plan as a whole, not this one tensor, exceeds Limit.
	Total bool
}

func (e *MemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "engine: %s: ", e.Model)
	if e.Node == "" && e.Op == "" {
		fmt.Fprintf(&b, "input %q ", e.Input)
	} else {
		fmt.Fprintf(&b, "node %q (%s): ", e.Node, e.Op)
	}
	switch {
	case e.Bytes < 0:
		fmt.Fprintf(&b, "shape %v has more elements than any memory holds; the model computes an impossible shape: check the shape values it is given", e.Shape)
	case e.Total:
		fmt.Fprintf(&b, "the run needs %s of buffers up to this node's %v output, over the memory limit of %s; use a smaller batch or raise the memory limit (Options.MaxBytes)", formatBytes(e.Bytes), e.Shape, formatBytes(e.Limit))
	default:
		fmt.Fprintf(&b, "a tensor of shape %v needs %s, over the memory limit of %s; check the shapes the model computes, use a smaller batch, or raise the memory limit (Options.MaxBytes)", e.Shape, formatBytes(e.Bytes), formatBytes(e.Limit))
	}
	return b.String()
}

// formatBytes writes n with a binary unit (KiB, MiB, ...), the form people give limits in.
func formatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.3g %ciB", v, units[u])
}

// shapeElems returns the number of elements of shape, or ok=false when a dimension is
// negative or the product, zeros counted as ones, exceeds maxElems.
func shapeElems(shape []int) (n int64, ok bool) {
	n, all := 1, int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(uint64(all), uint64(max(d, 1)))
		if hi != 0 || lo > maxElems {
			return 0, false
		}
		all = int64(lo)
		n *= int64(d)
	}
	return n, true
}

// elemBytes is the size of one element of the type.
func elemBytes(dt DType) int64 {
	if dt == Int64 {
		return 8
	}
	return 4
}

// DefaultMaxBytes returns the memory limit a graph uses when Options.MaxBytes is 0.
func DefaultMaxBytes() int64 { return physicalMemory() }

// budget accounts for the memory one plan allocates, refusing each tensor and the total
// before the allocation happens.
type budget struct {
	model string
	limit int64
	total int64
}

// tensor checks that a tensor of the shape and type fits in memory on its own, and
// returns its size in bytes. gn is its producer, nil for the graph input named input.
func (b *budget) tensor(gn *gnode, input string, dt DType, shape []int) (int64, error) {
	n, ok := shapeElems(shape)
	if !ok {
		return 0, b.err(gn, input, shape, -1, false)
	}
	size := n * elemBytes(dt)
	if size > b.limit {
		return 0, b.err(gn, input, shape, size, false)
	}
	return size, nil
}

// add counts bytes the plan is about to allocate for a tensor of the shape.
func (b *budget) add(gn *gnode, input string, shape []int, bytes int64) error {
	if bytes > b.limit-b.total {
		return b.err(gn, input, shape, b.total+bytes, true)
	}
	b.total += bytes
	return nil
}

func (b *budget) err(gn *gnode, input string, shape []int, bytes int64, total bool) error {
	e := &MemoryError{Model: b.model, Input: input, Shape: shape, Bytes: bytes, Limit: b.limit, Total: total}
	if gn != nil {
		e.Node, e.Op = gn.n.Name(), gn.op
	}
	return e
}

// fallbackMaxBytes is the default limit where the machine's memory is unknown.
const fallbackMaxBytes = 64 << 30
