package network

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/qtool/qtool/admmq"
)

// checkpointVersion changes whenever the checkpoint's layout does.
const checkpointVersion = 4

// namedParam is one float parameter. A slice sorted by name, not a map: gob writes maps
// in Go's random iteration order, and the same state must give the same bytes.
type namedParam struct {
	Name   string
	Values []float32
}

// checkpoint is a run's whole state at the end of an outer iteration. gob keeps
// float32 values bit for bit.
type checkpoint struct {
	Version int
	Algo    admmq.Method
	Seed    uint64
	Targets []string
	Sizes   []int
	// Params holds every float parameter of the graph: x, the biases and normalisation
	// parameters being trained, and the BatchNorm running statistics.
	Params    []namedParam
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
	// RhoFactor is residual balancing's factor on ρ (1 without balancing).
	RhoFactor float64
	// Best is the best iterate's state under IterateBest (nil: none yet).
	Best *snapshot
	// RhoScale is each tensor's factor on ρ: Config.GradientRho's depend on y⁰, which a
	// resumed run no longer has.
	RhoScale []float64
}

// Checkpoint serializes the run's state between outer iterations: x (every float
// parameter), y, λ, the optimizer's state, the iteration and step counters, the data
// order and Dropout's random stream. Restore on a run built with the same model, targets,
// data and Config continues bit-identically.
func (r *Run) Checkpoint() ([]byte, error) {
	c := checkpoint{
		Version: checkpointVersion, Algo: r.cfg.Method, Seed: r.cfg.Seed,
		Y: r.y, Lambda: r.lambda, LastY: r.lastY,
		Iter: r.iter, Epoch: r.epoch, Step: r.step, Best: r.best, RhoFactor: r.rhoFactor,
	}
	if !r.gradRho {
		c.RhoScale = r.rhoScale
	}
	// Wall-clock times would make two checkpoints of the same run differ; a resumed run
	// reports 0 s for the iterations it restored.
	for _, h := range r.history {
		h.Seconds, h.TrainSeconds, h.StatSeconds = 0, 0, 0
		c.History = append(c.History, h)
	}
	for i, t := range r.targets {
		c.Targets = append(c.Targets, t.Name)
		c.Sizes = append(c.Sizes, len(r.y[i]))
	}
	for _, p := range r.g.Params() {
		if p.Value.F != nil {
			c.Params = append(c.Params, namedParam{p.Name, p.Value.F})
		}
	}
	slices.SortFunc(c.Params, func(a, b namedParam) int { return strings.Compare(a.Name, b.Name) })
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
// with the same algorithm, seed and targets; otherwise Restore returns a *MismatchError
// naming the Config fields (Algo, Seed) or "Targets" that differ.
func (r *Run) Restore(data []byte) error {
	var c checkpoint
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&c); err != nil {
		return fmt.Errorf("%w: %w", ErrNotCheckpoint, err)
	}
	if c.Version != checkpointVersion {
		return &VersionError{Version: c.Version}
	}
	var diffs []SettingDiff
	if c.Algo != r.cfg.Method {
		diffs = append(diffs, SettingDiff{"Algo", string(c.Algo), string(r.cfg.Method)})
	}
	if c.Seed != r.cfg.Seed {
		diffs = append(diffs, SettingDiff{"Seed", fmt.Sprint(c.Seed), fmt.Sprint(r.cfg.Seed)})
	}
	same := len(c.Targets) == len(r.targets) && len(c.Sizes) == len(c.Targets) && len(c.Y) == len(c.Targets) && len(c.Lambda) == len(c.Targets)
	now := make([]string, len(r.targets))
	for i, t := range r.targets {
		now[i] = fmt.Sprintf("%s[%d]", t.Name, len(r.y[i]))
		same = same && c.Targets[i] == t.Name && c.Sizes[i] == len(r.y[i]) && len(c.Y[i]) == len(r.y[i]) && len(c.Lambda[i]) == len(r.y[i])
	}
	if !same {
		saved := make([]string, len(c.Targets))
		for i, name := range c.Targets {
			saved[i] = name
			if i < len(c.Sizes) {
				saved[i] = fmt.Sprintf("%s[%d]", name, c.Sizes[i])
			}
		}
		diffs = append(diffs, SettingDiff{"Targets", strings.Join(saved, " "), strings.Join(now, " ")})
	}
	if diffs != nil {
		return &MismatchError{Diffs: diffs}
	}
	if c.Iter > r.cfg.Iters {
		return fmt.Errorf("checkpoint is at iteration %d, beyond this run's %d", c.Iter, r.cfg.Iters)
	}
	params := make(map[string][]float32, len(c.Params))
	for _, p := range c.Params {
		params[p.Name] = p.Values
	}
	for _, p := range r.g.Params() {
		if p.Value.F == nil {
			continue
		}
		v, ok := params[p.Name]
		if !ok || len(v) != len(p.Value.F) {
			return fmt.Errorf("checkpoint does not hold parameter %s of this model", p.Name)
		}
	}
	for _, p := range r.g.Params() {
		if p.Value.F != nil {
			copy(p.Value.F, params[p.Name])
		}
	}
	r.g.ParamsChanged()
	for i := range r.targets {
		copy(r.y[i], c.Y[i])
		copy(r.lambda[i], c.Lambda[i])
		copy(r.lastY[i], c.LastY[i])
	}
	if err := r.cfg.Optimizer.UnmarshalBinary(c.Optimizer); err != nil {
		return fmt.Errorf("checkpoint optimizer state: %w (restore it into a run with the same Config.Optimizer)", err)
	}
	if err := r.pcg.UnmarshalBinary(c.RNG); err != nil {
		return fmt.Errorf("checkpoint random stream: %w", err)
	}
	r.iter, r.epoch, r.step = c.Iter, c.Epoch, c.Step
	r.history = append([]IterStats(nil), c.History...)
	r.best = c.Best
	if r.rhoFactor = c.RhoFactor; !(r.rhoFactor > 0) {
		return fmt.Errorf("checkpoint's ρ factor %v: want > 0", c.RhoFactor)
	}
	if c.RhoScale != nil {
		if len(c.RhoScale) != len(r.rhoScale) {
			return fmt.Errorf("checkpoint holds %d ρ factors, this run %d weights", len(c.RhoScale), len(r.rhoScale))
		}
		copy(r.rhoScale, c.RhoScale)
		r.gradRho = false
	}
	if r.best != nil && len(r.best.Y) != len(r.y) {
		return fmt.Errorf("checkpoint's best iterate holds %d weights, this run %d", len(r.best.Y), len(r.y))
	}
	if err := r.resetPoints(); err != nil {
		return err
	}
	// Replay the data order: epoch e of the seeded batches is a pure function of e.
	for r.feed.epoch < c.FeedEpoch {
		r.feed.restart()
	}
	r.feed.consumed, r.feed.n = 0, 0
	b := r.feed.b
	for range c.FeedBatches {
		if !b.Next() {
			return fmt.Errorf("checkpoint data position %d:%d is beyond the data: restore it into a run with the same data and batch size", c.FeedEpoch, c.FeedBatches)
		}
		r.feed.consumed++
	}
	return nil
}

// Setting is one input of a run that changes its result: a setting's value, or the
// identity of the model or data (a hash, or a name and size). Name is the caller's.
type Setting struct {
	Name, Value string
}

// Fingerprint lists every setting that determines a run's result. A checkpoint saved with
// one fingerprint only resumes a run with an equal one: resuming with another ρ, grid or
// data would silently mix two runs.
type Fingerprint []Setting

// sealMagic opens every checkpoint file.
const sealMagic = "qtool-checkpoint\n"

// ErrCorrupt reports a checkpoint file whose bytes do not match its checksum, or that is
// cut short.
var ErrCorrupt = errors.New("checkpoint is corrupted (its SHA-256 checksum does not match its content): delete it and start a new run")

// ErrNotCheckpoint reports a file that is not a qtool checkpoint at all.
var ErrNotCheckpoint = errors.New("not a qtool checkpoint")

// VersionError reports a checkpoint of a layout this qtool does not read.
type VersionError struct {
	// Version is the checkpoint's layout version; this qtool reads only its own.
	Version int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("checkpoint version %d: this qtool reads version %d; start a new run", e.Version, checkpointVersion)
}

// MismatchError reports a checkpoint saved by a run with other settings.
type MismatchError struct {
	// Diffs holds, per differing setting, its name and its values in the checkpoint and
	// in this run ("" when absent). Names are the Fingerprint's, or for Restore the Config
	// fields "Algo" and "Seed" and "Targets" (the target weights, as name[size]).
	Diffs []SettingDiff
}

// SettingDiff is one setting that differs between a checkpoint and a run.
type SettingDiff struct {
	Name, Saved, Now string
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint was saved by a run with other settings (")
	for i, d := range e.Diffs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s there, %s here", d.Name, orNone(d.Saved), orNone(d.Now))
	}
	b.WriteString("): restore it into a run with the same model, data and settings, or start a new run")
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// Seal wraps a run's state (from Checkpoint) into a checkpoint file's bytes: a header,
// the run's fingerprint, the state, and a SHA-256 checksum over all of it. The same state
// and fingerprint always give the same bytes.
func Seal(state []byte, fp Fingerprint) []byte {
	var b []byte
	b = append(b, sealMagic...)
	b = binary.BigEndian.AppendUint32(b, checkpointVersion)
	fp = sortedFingerprint(fp)
	b = binary.AppendUvarint(b, uint64(len(fp)))
	for _, s := range fp {
		b = appendString(b, s.Name)
		b = appendString(b, s.Value)
	}
	b = appendString(b, string(state))
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// Unseal checks a checkpoint file's bytes and returns the state to Restore. A file that
// is not a checkpoint returns ErrNotCheckpoint, a damaged one ErrCorrupt, one saved with
// another fingerprint a *MismatchError naming the settings that differ.
func Unseal(data []byte, fp Fingerprint) ([]byte, error) {
	if !bytes.HasPrefix(data, []byte(sealMagic)) {
		return nil, ErrNotCheckpoint
	}
	if len(data) < len(sealMagic)+4+sha256.Size {
		return nil, ErrCorrupt
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, ErrCorrupt
	}
	r := body[len(sealMagic):]
	if v := binary.BigEndian.Uint32(r); v != checkpointVersion {
		return nil, &VersionError{Version: int(v)}
	}
	r = r[4:]
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)) {
		return nil, ErrCorrupt
	}
	r = r[k:]
	saved := make(Fingerprint, n)
	var err error
	for i := range saved {
		if saved[i].Name, r, err = readString(r); err != nil {
			return nil, err
		}
		if saved[i].Value, r, err = readString(r); err != nil {
			return nil, err
		}
	}
	state, r, err := readString(r)
	if err != nil || len(r) != 0 {
		return nil, ErrCorrupt
	}
	if diffs := compareFingerprints(saved, sortedFingerprint(fp)); len(diffs) > 0 {
		return nil, &MismatchError{Diffs: diffs}
	}
	return []byte(state), nil
}

func sortedFingerprint(fp Fingerprint) Fingerprint {
	fp = slices.Clone(fp)
	slices.SortStableFunc(fp, func(a, b Setting) int { return strings.Compare(a.Name, b.Name) })
	return fp
}

// compareFingerprints lists the settings of two sorted fingerprints that differ.
func compareFingerprints(saved, now Fingerprint) []SettingDiff {
	var d []SettingDiff
	i, j := 0, 0
	for i < len(saved) || j < len(now) {
		switch {
		case j == len(now) || (i < len(saved) && saved[i].Name < now[j].Name):
			d = append(d, SettingDiff{saved[i].Name, saved[i].Value, ""})
			i++
		case i == len(saved) || now[j].Name < saved[i].Name:
			d = append(d, SettingDiff{now[j].Name, "", now[j].Value})
			j++
		default:
			if saved[i].Value != now[j].Value {
				d = append(d, SettingDiff{now[j].Name, saved[i].Value, now[j].Value})
			}
			i++
			j++
		}
	}
	return d
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(r []byte) (string, []byte, error) {
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(len(r)-k) {
		return "", nil, ErrCorrupt
	}
	return string(r[k : k+int(n)]), r[k+int(n):], nil
}
