package network

import (
	"bytes"
	"encoding/gob"
	"fmt"
)

// checkpointVersion changes whenever the checkpoint's layout does.
const checkpointVersion = 1

// checkpoint is a run's whole state at the end of an outer iteration. gob keeps
// float32 values bit for bit.
type checkpoint struct {
	Version int
	Algo    Algo
	Seed    uint64
	Targets []string
	Sizes   []int
	// Params holds every float parameter of the graph: x, the biases and normalisation
	// parameters being trained, and the BatchNorm running statistics.
	Params    map[string][]float32
	Y, Lambda [][]float32
	LastY     [][]float32
	Iter      int
	Epoch     int
	Step      int
	// FeedEpoch and FeedBatches place the shuffled calibration batches.
	FeedEpoch, FeedBatches int
	Optimizer              []byte
	RNG                    []byte
	History                []IterStats
}

// Checkpoint serializes the run's state between outer iterations: x (every float
// parameter), y, λ, the optimizer's state, the iteration and step counters, the data
// order and Dropout's random stream. Restore on a run built with the same model, targets,
// data and Config continues bit-identically.
func (r *Run) Checkpoint() ([]byte, error) {
	c := checkpoint{
		Version: checkpointVersion, Algo: r.cfg.Algo, Seed: r.cfg.Seed,
		Params: map[string][]float32{}, Y: r.y, Lambda: r.lambda, LastY: r.lastY,
		Iter: r.iter, Epoch: r.epoch, Step: r.step, History: r.history,
	}
	for i, t := range r.targets {
		c.Targets = append(c.Targets, t.Name)
		c.Sizes = append(c.Sizes, len(r.y[i]))
	}
	for _, p := range r.g.Params() {
		if p.Value.F != nil {
			c.Params[p.Name] = p.Value.F
		}
	}
	c.FeedEpoch, c.FeedBatches = r.feed.position()
	var err error
	if c.Optimizer, err = r.cfg.Optimizer.MarshalBinary(); err != nil {
		return nil, fmt.Errorf("network: optimizer state: %w", err)
	}
	if c.RNG, err = r.pcg.MarshalBinary(); err != nil {
		return nil, fmt.Errorf("network: random stream: %w", err)
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&c); err != nil {
		return nil, fmt.Errorf("network: encoding checkpoint: %w", err)
	}
	return buf.Bytes(), nil
}

// Restore replaces the run's state with a checkpoint's. The run must have been built
// with the same algorithm, seed and targets.
func (r *Run) Restore(data []byte) error {
	var c checkpoint
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return fmt.Errorf("not a qtool checkpoint: %w", err)
	}
	if c.Version != checkpointVersion {
		return fmt.Errorf("checkpoint version %d: this qtool reads version %d", c.Version, checkpointVersion)
	}
	if c.Algo != r.cfg.Algo || c.Seed != r.cfg.Seed {
		return fmt.Errorf("checkpoint is of --algo %s --seed %d, not --algo %s --seed %d", c.Algo, c.Seed, r.cfg.Algo, r.cfg.Seed)
	}
	if len(c.Targets) != len(r.targets) {
		return fmt.Errorf("checkpoint has %d target weights, this run %d: use the same model and --keep/--only", len(c.Targets), len(r.targets))
	}
	for i, t := range r.targets {
		if c.Targets[i] != t.Name || c.Sizes[i] != len(r.y[i]) || len(c.Y[i]) != len(r.y[i]) || len(c.Lambda[i]) != len(r.y[i]) {
			return fmt.Errorf("checkpoint target %d is %s, this run's is %s: use the same model and --keep/--only", i, c.Targets[i], t.Name)
		}
	}
	if c.Iter > r.cfg.Iters {
		return fmt.Errorf("checkpoint is at iteration %d, beyond this run's %d", c.Iter, r.cfg.Iters)
	}
	for _, p := range r.g.Params() {
		if p.Value.F == nil {
			continue
		}
		v, ok := c.Params[p.Name]
		if !ok || len(v) != len(p.Value.F) {
			return fmt.Errorf("checkpoint does not hold parameter %s of this model", p.Name)
		}
	}
	for _, p := range r.g.Params() {
		if p.Value.F != nil {
			copy(p.Value.F, c.Params[p.Name])
		}
	}
	for i := range r.targets {
		copy(r.y[i], c.Y[i])
		copy(r.lambda[i], c.Lambda[i])
		copy(r.lastY[i], c.LastY[i])
	}
	if err := r.cfg.Optimizer.UnmarshalBinary(c.Optimizer); err != nil {
		return fmt.Errorf("checkpoint optimizer state: %w (use the same --optimizer)", err)
	}
	if err := r.pcg.UnmarshalBinary(c.RNG); err != nil {
		return fmt.Errorf("checkpoint random stream: %w", err)
	}
	r.iter, r.epoch, r.step = c.Iter, c.Epoch, c.Step
	r.history = append([]IterStats(nil), c.History...)
	// Replay the data order: epoch e of the seeded batches is a pure function of e.
	b := r.feed.b
	for b.Epoch() < c.FeedEpoch {
		b.Reset()
	}
	r.feed.consumed, r.feed.n = 0, 0
	for range c.FeedBatches {
		if !b.Next() {
			return fmt.Errorf("checkpoint data position %d:%d is beyond the data: use the same --data and --batch-size", c.FeedEpoch, c.FeedBatches)
		}
		r.feed.consumed++
	}
	return nil
}
