package calib

import (
	"fmt"
	"math/rand/v2"
)

// BatchOptions configures a Batches iterator.
type BatchOptions struct {
	// Size is the number of samples per batch.
	Size int
	// Shuffle draws a new seeded permutation of the samples each epoch; otherwise batches
	// follow the data set's order.
	Shuffle bool
	// Seed seeds the permutations: epoch e of a given seed is always the same.
	Seed uint64
	// DropLast skips the last batch of an epoch when it is smaller than Size.
	DropLast bool
	// Augment transforms the image samples of every batch, drawn from Seed and the epoch
	// as the shuffle is: for training batches only.
	Augment Augment
}

// Batches iterates over a data set in mini-batches, reusing its buffers: after the first
// batch, iterating allocates nothing.
//
//	b, err := calib.NewBatches(d, calib.BatchOptions{Size: 256, Shuffle: true, Seed: seed})
//	for epoch := 0; epoch < epochs; epoch++ {
//		for b.Next() {
//			step(b.X(), b.Shape(), b.Y())
//		}
//		if err := b.Err(); err != nil { ... }
//		b.Reset()
//	}
type Batches struct {
	d      Dataset
	opt    BatchOptions
	sample int
	lw     int // labels per sample
	epoch  int
	order  []int
	pos    int
	n      int
	x      []float32
	y      []int64
	shape  []int64
	err    error
	aug    *augmenter // nil without augmentation
	// The model's other inputs (Options.Inputs) for the current batch.
	extras []*extra
	ef     [][]float32
	ei     [][]int64
	eshape [][]int64
}

// NewBatches returns an iterator over d positioned before the first batch of epoch 0.
func NewBatches(d Dataset, o BatchOptions) (*Batches, error) {
	if o.Size <= 0 {
		return nil, fmt.Errorf("batch size %d: want at least 1", o.Size)
	}
	if d.Len() == 0 {
		return nil, fmt.Errorf("empty data set")
	}
	b := &Batches{d: d, opt: o, sample: SampleSize(d), lw: LabelsPerSample(d)}
	b.order = make([]int, d.Len())
	// No batch holds more than the data set: a batch size above it (binarize's default
	// 512 over 256 images of 224 px) would otherwise reserve buffers no batch fills,
	// which the Go runtime counts against its memory limit all the same.
	most := min(o.Size, d.Len())
	b.x = make([]float32, most*b.sample)
	if d.HasLabels() {
		b.y = make([]int64, most*b.lw)
	}
	b.shape = append([]int64{0}, d.SampleShape()...)
	b.extras, _ = extrasOf(d, nil)
	b.aug = newAugmenter(o.Augment, d.SampleShape())
	for _, e := range b.extras {
		n := prod64(e.batchShape(most))
		var f []float32
		var i []int64
		if e.Int64 {
			i = make([]int64, n)
		} else {
			f = make([]float32, n)
		}
		b.ef, b.ei, b.eshape = append(b.ef, f), append(b.ei, i), append(b.eshape, nil)
	}
	b.arrange()
	return b, nil
}

// arrange sets the sample order of the current epoch.
func (b *Batches) arrange() {
	for i := range b.order {
		b.order[i] = i
	}
	if b.opt.Shuffle {
		// One generator per epoch, so that epoch e does not depend on how far earlier
		// epochs were iterated.
		rng := rand.New(rand.NewPCG(b.opt.Seed, uint64(b.epoch)))
		rng.Shuffle(len(b.order), func(i, j int) { b.order[i], b.order[j] = b.order[j], b.order[i] })
	}
	if b.aug != nil {
		b.aug.epoch(b.opt.Seed, b.epoch)
	}
	b.pos, b.n = 0, 0
}

// Next reads the next batch. It returns false at the end of the epoch or on an error, which
// Err then returns.
func (b *Batches) Next() bool {
	if b.err != nil {
		return false
	}
	rest := len(b.order) - b.pos
	n := min(rest, b.opt.Size)
	if n == 0 || (b.opt.DropLast && n < b.opt.Size) {
		b.n = 0
		return false
	}
	idx := b.order[b.pos : b.pos+n]
	var y []int64
	if b.y != nil {
		y = b.y[:n*b.lw]
	}
	if err := b.d.Read(idx, b.x[:n*b.sample], y); err != nil {
		b.err = err
		b.n = 0
		return false
	}
	if b.aug != nil {
		b.aug.apply(b.x[:n*b.sample], n)
	}
	if len(b.extras) > 0 {
		_, at := extrasOf(b.d, idx)
		for k, e := range b.extras {
			b.eshape[k] = e.batchShape(n)
			m := prod64(b.eshape[k])
			if e.Int64 {
				b.ei[k] = b.ei[k][:m]
			} else {
				b.ef[k] = b.ef[k][:m]
			}
			e.gather(at, b.ef[k], b.ei[k])
		}
	}
	b.pos += n
	b.n = n
	b.shape[0] = int64(n)
	return true
}

// ExtraInputs returns the number of model inputs a batch holds besides X (Options.Inputs).
func (b *Batches) ExtraInputs() int { return len(b.extras) }

// ExtraInput returns the model input k after X in the current batch: its name, shape,
// batch axis (-1: none, the same values for every batch) and its float32 or int64
// values. The slices are reused by the next call to Next.
func (b *Batches) ExtraInput(k int) (name string, shape []int64, axis int, f []float32, i []int64) {
	e := b.extras[k]
	return e.Name, b.eshape[k], e.Axis, b.ef[k], b.ei[k]
}

// Reset starts the next epoch, with a new permutation when shuffling.
func (b *Batches) Reset() {
	b.epoch++
	b.arrange()
}

// Epoch returns the current epoch, counted from 0.
func (b *Batches) Epoch() int { return b.epoch }

// Len returns the number of samples in the current batch.
func (b *Batches) Len() int { return b.n }

// X returns the current batch, Len() samples in the model's layout. The slice is reused by
// the next call to Next.
func (b *Batches) X() []float32 { return b.x[:b.n*b.sample] }

// Y returns the labels of the current batch, LabelsPerSample of the data set per sample
// (IgnoredLabel for ignored positions), or nil without labels.
func (b *Batches) Y() []int64 {
	if b.y == nil {
		return nil
	}
	return b.y[:b.n*b.lw]
}

// Shape returns the shape of X: the batch size, then the sample shape.
func (b *Batches) Shape() []int64 { return b.shape }

// Indices returns the data set indices of the current batch's samples.
func (b *Batches) Indices() []int { return b.order[b.pos-b.n : b.pos] }

// Err returns the error that stopped the iteration, if any.
func (b *Batches) Err() error { return b.err }
