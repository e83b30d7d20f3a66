package train

import "math"

// Schedule gives the learning rate of each optimizer step.
//
// Rate receives the number of steps taken before this one (0 for the first) and the
// current epoch (from 0).
type Schedule interface {
	Rate(step, epoch int) float64
}

// Constant keeps the learning rate at LR.
type Constant struct {
	LR float64
}

// Rate implements Schedule.
func (c Constant) Rate(step, epoch int) float64 { return c.LR }

// StepDecay multiplies the learning rate by Gamma every Every epochs: LR·Gamma^⌊epoch/Every⌋
// (PyTorch's StepLR stepped once per epoch).
type StepDecay struct {
	LR    float64
	Every int
	Gamma float64
}

// Rate implements Schedule. Every < 1 means no decay.
func (s StepDecay) Rate(step, epoch int) float64 {
	if s.Every < 1 {
		return s.LR
	}
	return s.LR * math.Pow(s.Gamma, float64(epoch/s.Every))
}

// Cosine anneals the learning rate from LR to Min along half a cosine over Total steps,
// or over Total epochs when PerEpoch is set:
//
//	Min + (LR − Min)·(1 + cos(π·t/Total))/2
//
// (the closed form of PyTorch's CosineAnnealingLR with T_max = Total, eta_min = Min).
// After Total the rate stays at Min, where PyTorch's would rise again; Total < 1 means no
// annealing.
type Cosine struct {
	LR, Min  float64
	Total    int
	PerEpoch bool
}

// Rate implements Schedule.
func (c Cosine) Rate(step, epoch int) float64 {
	t := step
	if c.PerEpoch {
		t = epoch
	}
	if c.Total < 1 {
		return c.LR
	}
	if t >= c.Total {
		return c.Min
	}
	return c.Min + (c.LR-c.Min)*(1+math.Cos(math.Pi*float64(t)/float64(c.Total)))/2
}
