package engine

import "math"

// expF returns e^x for float32 x within 2 ulp of the correctly rounded result
// (TestExpF sweeps the range), using about two thirds of math.Exp's CPU time. It reduces
// x = k·ln2 + r with |r| ≤ ln2/2, evaluates e^r by its degree-7 Taylor polynomial in
// float64 (truncation below 1e-8 relative) and scales by 2^k through the exponent bits.
func expF(x float32) float32 {
	switch {
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.97209:
		return 0
	case x != x:
		return x
	}
	const (
		log2e = 1.4426950408889634
		ln2   = 0.6931471805599453
	)
	xd := float64(x)
	k := math.Floor(xd*log2e + 0.5)
	r := xd - k*ln2
	// Estrin's scheme: shorter dependency chains than Horner's, ~20% faster here.
	r2 := r * r
	r4 := r2 * r2
	p := (1 + r) + r2*(1.0/2+r*(1.0/6)) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040)))
	return float32(p * math.Float64frombits(uint64(int64(k)+1023)<<52))
}
