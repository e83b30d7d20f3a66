package admmq

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// levelsOf returns the finite candidate levels of a coordinate-wise set for brute force.
func levelsOf(s *Set) []float64 {
	sp := s.Spec()
	switch sp.Kind {
	case KindBinary:
		return []float64{-1, 1}
	case KindScaledBinary:
		return []float64{-sp.Alpha, sp.Alpha}
	case KindTernary:
		return []float64{-sp.Alpha, 0, sp.Alpha}
	case KindUniform:
		m := 1<<(sp.Bits-1) - 1
		var l []float64
		for j := -m; j <= m; j++ {
			l = append(l, sp.Alpha*float64(j))
		}
		return l
	case KindBox:
		var l []float64
		for j := sp.Lo; j <= sp.Hi; j++ {
			l = append(l, float64(j))
		}
		return l
	case KindLattice:
		var l []float64
		for j := -6; j <= 6; j++ {
			l = append(l, sp.Step*float64(j))
		}
		return l
	}
	panic("kind")
}

// bruteNearest enumerates every point of levels^d and returns the minimum squared distance
// and the coordinate-wise largest minimiser (the documented tie rule).
func bruteNearest(z []float64, levels []float64) (float64, []float64) {
	d := len(z)
	idx := make([]int, d)
	best := math.Inf(1)
	var arg []float64
	for {
		var e float64
		p := make([]float64, d)
		for i := range z {
			p[i] = levels[idx[i]]
			e += (z[i] - p[i]) * (z[i] - p[i])
		}
		if e < best {
			best, arg = e, p
		} else if e == best {
			// among minimisers keep the coordinate-wise largest; for a product set the
			// minimisers form a product, so the coordinate-wise max is itself a minimiser.
			for i := range p {
				arg[i] = max(arg[i], p[i])
			}
		}
		k := 0
		for ; k < d; k++ {
			idx[k]++
			if idx[k] < len(levels) {
				break
			}
			idx[k] = 0
		}
		if k == d {
			return best, arg
		}
	}
}

func TestFixedSetsBruteForce(t *testing.T) {
	sets := []Spec{
		{Kind: KindBinary},
		{Kind: KindScaledBinary, Alpha: 0.75},
		{Kind: KindTernary, Alpha: 0.5},
		{Kind: KindUniform, Bits: 3, Alpha: 0.25},
		{Kind: KindBox, Lo: -2, Hi: 3},
		{Kind: KindLattice, Step: 8},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sp := range sets {
		s := MustSet(sp)
		lv := levelsOf(s)
		// Candidate coordinates: random points, the levels themselves, and every midpoint
		// between adjacent levels (exact ties, since levels are dyadic).
		var special []float64
		for i := range lv {
			special = append(special, lv[i])
			if i+1 < len(lv) {
				special = append(special, (lv[i]+lv[i+1])/2)
			}
		}
		scale := lv[len(lv)-1] - lv[0]
		for trial := 0; trial < 400; trial++ {
			z := make([]float64, 3)
			for i := range z {
				if rng.IntN(2) == 0 && sp.Kind != KindLattice {
					z[i] = special[rng.IntN(len(special))]
				} else if sp.Kind == KindLattice {
					if rng.IntN(2) == 0 {
						z[i] = special[2+rng.IntN(len(special)-4)]
					} else {
						z[i] = (rng.Float64() - 0.5) * 60
					}
				} else {
					z[i] = (rng.Float64() - 0.5) * 1.5 * scale
				}
			}
			wantD, want := bruteNearest(z, lv)
			got := make([]float64, 3)
			if err := s.Project64(got, z, Layout{}); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: P(%v) = %v, brute force %v", sp.Kind, z, got, want)
				}
			}
			d, _ := s.Dist64(z, Layout{})
			if math.Abs(d*d-wantD) > 1e-12*(1+wantD) {
				t.Fatalf("%s: Dist(%v)² = %v, brute force %v", sp.Kind, z, d*d, wantD)
			}
			z32 := []float32{float32(z[0]), float32(z[1]), float32(z[2])}
			g32 := make([]float32, 3)
			if err := s.Project32(g32, z32, Layout{}); err != nil {
				t.Fatal(err)
			}
			for i := range g32 {
				if float64(g32[i]) != want[i] && float64(z32[i]) == z[i] {
					t.Fatalf("%s float32: P(%v) = %v, want %v", sp.Kind, z32, g32, want)
				}
			}
		}
	}
}

func TestBinaryTieIsPlusOne(t *testing.T) {
	s := MustSet(Spec{Kind: KindBinary})
	got := make([]float64, 2)
	if err := s.Project64(got, []float64{0, math.Copysign(0, -1)}, Layout{}); err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[1] != 1 {
		t.Fatalf("sign(0), sign(-0) = %v, want +1 (paper, Example 2.1)", got)
	}
}

// bruteJoint minimises ‖z − α s‖² over α ≥ 0 and s in levels^n (levels in units of α) by
// enumerating s and taking the closed-form best α = max(0, ⟨z,s⟩/‖s‖²) for each.
func bruteJoint(z []float64, levels []float64) float64 {
	n := len(z)
	idx := make([]int, n)
	best := math.Inf(1)
	for {
		var zs, ss, zz float64
		for i := range z {
			s := levels[idx[i]]
			zs += z[i] * s
			ss += s * s
			zz += z[i] * z[i]
		}
		e := zz
		if ss > 0 && zs > 0 {
			e = zz - zs*zs/ss
		}
		best = min(best, e)
		k := 0
		for ; k < n; k++ {
			idx[k]++
			if idx[k] < len(levels) {
				break
			}
			idx[k] = 0
		}
		if k == n {
			return best
		}
	}
}

func TestJointScaleBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := []struct {
		spec   Spec
		levels []float64
	}{
		{Spec{Kind: KindScaledBinary, Scale: ScaleOptimal}, []float64{-1, 1}},
		{Spec{Kind: KindTernary, Scale: ScaleOptimal}, []float64{-1, 0, 1}},
	}
	for _, c := range cases {
		s := MustSet(c.spec)
		for trial := 0; trial < 300; trial++ {
			n := 1 + rng.IntN(7)
			z := make([]float64, n)
			for i := range z {
				z[i] = rng.NormFloat64()
				if rng.IntN(4) == 0 { // repeated magnitudes and zeros exercise ties
					z[i] = float64(rng.IntN(3)-1) * 0.5
				}
			}
			want := bruteJoint(z, c.levels)
			d, err := s.Dist64(z, Layout{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(d*d-want) > 1e-9*(1+want) {
				t.Fatalf("%s: joint distance² of %v = %v, brute force %v", c.spec.Kind, z, d*d, want)
			}
			p := make([]float64, n)
			if err := s.Project64(p, z, Layout{}); err != nil {
				t.Fatal(err)
			}
			var e float64
			for i := range p {
				e += (p[i] - z[i]) * (p[i] - z[i])
			}
			if math.Abs(e-want) > 1e-9*(1+want) {
				t.Fatalf("%s: projection of %v = %v has error %v, optimum %v", c.spec.Kind, z, p, e, want)
			}
		}
	}
}

func TestScaledBinaryIsXNORClosedForm(t *testing.T) {
	s := MustSet(Spec{Kind: KindScaledBinary, Scale: ScaleOptimal})
	z := []float64{0.3, -1.2, 0, 2.5, -0.1}
	p := make([]float64, len(z))
	if err := s.Project64(p, z, Layout{}); err != nil {
		t.Fatal(err)
	}
	alpha := (0.3 + 1.2 + 0 + 2.5 + 0.1) / 5
	want := []float64{alpha, -alpha, alpha, alpha, -alpha}
	for i := range p {
		if math.Abs(p[i]-want[i]) > 1e-15 {
			t.Fatalf("P(%v) = %v, want sign(z)·mean|z| = %v", z, p, want)
		}
	}
}

func TestPerChannelMatchesChannelByChannel(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	shape := []int{3, 4, 2, 5}
	n := 3 * 4 * 2 * 5
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
	}
	for _, sp := range []Spec{
		{Kind: KindScaledBinary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindUniform, Bits: 4, Scale: ScaleMax, PerChannel: true},
	} {
		s := MustSet(sp)
		tensorwide := MustSet(Spec{Kind: sp.Kind, Scale: sp.Scale, Bits: sp.Bits})
		for axis := range shape {
			got := make([]float32, n)
			if err := s.Project32(got, z, Layout{Shape: shape, Axis: axis}); err != nil {
				t.Fatal(err)
			}
			// Reference: gather each channel by multi-index, project it as a vector.
			strides := []int{shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1}
			for c := 0; c < shape[axis]; c++ {
				var idx []int
				for i := 0; i < n; i++ {
					if (i/strides[axis])%shape[axis] == c {
						idx = append(idx, i)
					}
				}
				ch := make([]float32, len(idx))
				for k, i := range idx {
					ch[k] = z[i]
				}
				want := make([]float32, len(idx))
				if err := tensorwide.Project32(want, ch, Layout{}); err != nil {
					t.Fatal(err)
				}
				for k, i := range idx {
					if got[i] != want[k] {
						t.Fatalf("%s axis %d channel %d: element %d = %v, channel-alone projection %v", sp.Kind, axis, c, i, got[i], want[k])
					}
				}
			}
		}
	}
}

func TestSetErrors(t *testing.T) {
	bad := []Spec{
		{Kind: "octal"},
		{Kind: KindUniform, Bits: 1, Alpha: 1},
		{Kind: KindBox, Lo: 2, Hi: 1},
		{Kind: KindLattice},
		{Kind: KindTernary, Alpha: -1},
		{Kind: KindBinary, PerChannel: true},
		{Kind: KindUniform, Bits: 3, Scale: "median"},
	}
	for _, sp := range bad {
		if _, err := NewSet(sp); err == nil {
			t.Errorf("NewSet(%+v) accepted an invalid spec", sp)
		}
	}
	s := MustSet(Spec{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true})
	x := make([]float32, 6)
	if err := s.Project32(x, x, Layout{}); err == nil {
		t.Error("per-channel projection without a shape accepted")
	}
	if err := s.Project32(x, x, Layout{Shape: []int{2, 2}}); err == nil {
		t.Error("shape with the wrong element count accepted")
	}
	if err := s.Project32(x, x, Layout{Shape: []int{2, 3}, Axis: 2}); err == nil {
		t.Error("out-of-range axis accepted")
	}
	b := MustSet(Spec{Kind: KindLattice, Step: 8})
	if err := b.Project64([]float64{0}, []float64{math.NaN()}, Layout{}); !errors.Is(err, ErrNaN) {
		t.Errorf("NaN input: err = %v, want ErrNaN", err)
	}
}

func TestProjectDoesNotAllocate(t *testing.T) {
	z := make([]float32, 4096)
	for i := range z {
		z[i] = float32(i%17) - 8
	}
	dst := make([]float32, len(z))
	l := Layout{Shape: []int{64, 64}, Axis: 0}
	for _, sp := range []Spec{
		{Kind: KindBinary},
		{Kind: KindScaledBinary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindLattice, Step: 0.5},
	} {
		s := MustSet(sp)
		_ = s.Project32(dst, z, l) // warm the scratch pool
		allocs := testing.AllocsPerRun(20, func() {
			if err := s.Project32(dst, z, l); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per projection, want 0", sp.Kind, allocs)
		}
		scratch := make([]float32, len(z))
		lam := make([]float32, len(z))
		allocs = testing.AllocsPerRun(20, func() {
			if _, err := UpdateYQ(s, dst, z, lam, scratch, 2, l); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per UpdateYQ, want 0", sp.Kind, allocs)
		}
	}
}

func BenchmarkProject16M(b *testing.B) {
	const n = 1 << 24
	rng := rand.New(rand.NewPCG(7, 8))
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
	}
	dst := make([]float32, n)
	l := Layout{Shape: []int{4096, 4096}, Axis: 0}
	for _, c := range []struct {
		name string
		spec Spec
	}{
		{"binary", Spec{Kind: KindBinary}},
		{"scaled-binary-per-channel", Spec{Kind: KindScaledBinary, Scale: ScaleOptimal, PerChannel: true}},
		{"ternary-optimal-per-channel", Spec{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true}},
		{"uniform4-max-per-channel", Spec{Kind: KindUniform, Bits: 4, Scale: ScaleMax, PerChannel: true}},
	} {
		s := MustSet(c.spec)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := s.Project32(dst, z, l); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"-parallel", func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := s.ProjectParallel32(dst, z, l, runtime.NumCPU()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestRoundHalfUp(t *testing.T) {
	cases := map[float64]float64{
		0: 0, 0.5: 1, -0.5: 0, 1.5: 2, 2.5: 3, -1.5: -1, -2.5: -2, 0.49999999999999994: 0,
		-0.49999999999999994: 0, 0.5000000000000001: 1, -0.5000000000000001: -1, 1e-300: 0,
		4503599627370495.5: 4503599627370496, 1 << 53: 1 << 53, -7.25: -7, 7.75: 8,
	}
	for x, want := range cases {
		if got := roundHalfUp(x); got != want {
			t.Errorf("roundHalfUp(%v) = %v, want %v", x, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 100000; i++ {
		x := (rng.Float64() - 0.5) * math.Pow(2, float64(rng.IntN(60)))
		f := math.Floor(x)
		want := f
		if x-f >= 0.5 {
			want = f + 1
		}
		if got := roundHalfUp(x); got != want {
			t.Fatalf("roundHalfUp(%v) = %v, want %v", x, got, want)
		}
	}
}

func TestProjectParallelMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	shape := []int{37, 3, 41, 23} // 104 673 elements, channel counts that do not divide evenly
	n := 37 * 3 * 41 * 23
	z := make([]float32, n)
	for i := range z {
		z[i] = float32(rng.NormFloat64())
	}
	for _, sp := range []Spec{
		{Kind: KindBinary},
		{Kind: KindTernary, Alpha: 0.7},
		{Kind: KindScaledBinary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindTernary, Scale: ScaleOptimal},
		{Kind: KindUniform, Bits: 3, Scale: ScaleMax, PerChannel: true},
	} {
		s := MustSet(sp)
		for _, axis := range []int{0, 2} {
			l := Layout{Shape: shape, Axis: axis}
			want := make([]float32, n)
			if err := s.Project32(want, z, l); err != nil {
				t.Fatal(err)
			}
			for _, w := range []int{1, 2, 5} {
				got := make([]float32, n)
				if err := s.ProjectParallel32(got, z, l, w); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("%+v axis %d, %d workers: parallel projection differs from the serial one", sp, axis, w)
				}
			}
		}
	}
}

// TestUniformJointScaleBruteForce: on int2 and int3 grids ScaleOptimal's projection has the
// least error over every α and every choice of levels (enumerated), as Leng et al. fit
// the scale; ScaleMax (α = max|z|/m) misses that optimum on some draws, the negative
// control that the comparison tells the two apart.
func TestUniformJointScaleBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, bits := range []int{2, 3} {
		m := 1<<(bits-1) - 1
		var levels []float64
		for l := -m; l <= m; l++ {
			levels = append(levels, float64(l))
		}
		opt := MustSet(Spec{Kind: KindUniform, Bits: bits, Scale: ScaleOptimal})
		mx := MustSet(Spec{Kind: KindUniform, Bits: bits, Scale: ScaleMax})
		maxMissed := 0
		for trial := 0; trial < 200; trial++ {
			z := make([]float64, 1+rng.IntN(5))
			for i := range z {
				z[i] = rng.NormFloat64()
				if rng.IntN(4) == 0 {
					z[i] = float64(rng.IntN(3)-1) * 0.5
				}
			}
			want := bruteJoint(z, levels)
			errOf := func(s *Set) float64 {
				p := make([]float64, len(z))
				if err := s.Project64(p, z, Layout{}); err != nil {
					t.Fatal(err)
				}
				var e float64
				for i := range p {
					e += (p[i] - z[i]) * (p[i] - z[i])
				}
				return e
			}
			if e := errOf(opt); math.Abs(e-want) > 1e-9*(1+want) {
				t.Fatalf("int%d: projection of %v has error %v, joint optimum %v", bits, z, e, want)
			}
			if errOf(mx) > want*(1+1e-6)+1e-12 {
				maxMissed++
			}
		}
		if maxMissed == 0 {
			t.Errorf("int%d: ScaleMax reached the joint optimum on every draw: the test cannot tell a non-optimal scale", bits)
		}
		t.Logf("int%d: ScaleMax above the optimum on %d of 200 draws", bits, maxMissed)
	}
}

// TestUniformJointScaleIntervals checks ScaleOptimal's merged sweep on int4 and int8 grids
// against a direct reference: between consecutive breakpoints a_i/(k − ½) every level is
// fixed, so the optimum is the best of each interval's clamped least-squares α, with the
// levels found by rounding at the interval's midpoint and the error summed directly. The
// draws are too large for TestUniformJointScaleBruteForce's enumeration of levels. ScaleMax
// above the optimum on some draws is the negative control; the logged averages are what
// the grids' choice of rule rests on (admmq/network: int8 keeps ScaleMax).
func TestUniformJointScaleIntervals(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, bits := range []int{4, 8} {
		m := float64(int(1)<<(bits-1) - 1)
		opt := MustSet(Spec{Kind: KindUniform, Bits: bits, Scale: ScaleOptimal})
		mx := MustSet(Spec{Kind: KindUniform, Bits: bits, Scale: ScaleMax})
		const draws = 40
		missed, gain := 0, 0.0
		for trial := range draws {
			z := make([]float64, 2+rng.IntN(40))
			for i := range z {
				if trial%2 == 0 {
					z[i] = rng.NormFloat64()
				} else { // Laplace
					z[i] = rng.ExpFloat64() * float64(1-2*rng.IntN(2))
				}
			}
			var cuts []float64
			for _, v := range z {
				for k := 1.0; k <= m; k++ {
					cuts = append(cuts, math.Abs(v)/(k-0.5))
				}
			}
			cuts = append(cuts, 0)
			slices.Sort(cuts)
			errAt := func(a float64) float64 {
				var e float64
				for _, v := range z {
					q := a * min(max(math.Round(v/a), -m), m)
					e += (v - q) * (v - q)
				}
				return e
			}
			var want float64
			for _, v := range z {
				want += v * v
			}
			for j := 0; j+1 < len(cuts); j++ {
				lo, hi := cuts[j], cuts[j+1]
				if !(hi > lo) {
					continue
				}
				mid := (lo + hi) / 2
				var szq, sqq float64
				for _, v := range z {
					q := min(math.Round(math.Abs(v)/mid), m)
					szq += math.Abs(v) * q
					sqq += q * q
				}
				if sqq == 0 {
					continue
				}
				a := min(max(szq/sqq, lo), hi)
				// Evaluate with the interval's levels: at its ends rounding may already
				// take the neighbouring interval's, which is no worse.
				var e float64
				for _, v := range z {
					q := a * math.Copysign(min(math.Round(math.Abs(v)/mid), m), v)
					e += (v - q) * (v - q)
				}
				want = min(want, e, errAt(a))
			}
			got, err := opt.Dist64(z, Layout{})
			if err != nil {
				t.Fatal(err)
			}
			if got*got > want*(1+1e-9)+1e-12 {
				t.Fatalf("int%d draw %d: ScaleOptimal's error %v above the best interval's %v", bits, trial, got*got, want)
			}
			em, _ := mx.Dist64(z, Layout{})
			if em*em > want*(1+1e-6)+1e-12 {
				missed++
			}
			gain += (1 - got*got/(em*em)) / draws
		}
		if missed == 0 {
			t.Errorf("int%d: ScaleMax reached the optimum on every draw: the test cannot tell the rules apart", bits)
		}
		t.Logf("int%d: ScaleMax above the optimum on %d of %d draws; the optimum's squared error is %.1f %% lower on average", bits, missed, draws, 100*gain)
	}
}

// TestProjectConcurrentScales: a tensor large enough for its channels' joint scales to be
// fitted concurrently projects to the same bits on one goroutine and on four, into a
// separate slice and in place.
func TestProjectConcurrentScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const channels, inner = 37, 2048 // 75 776 elements: above the concurrency threshold
	z := make([]float32, channels*inner)
	for i := range z {
		z[i] = float32(rng.NormFloat64() * (1 + float64(i%channels)))
	}
	l := Layout{Shape: []int{inner, channels}, Axis: 1}
	for _, spec := range []Spec{
		{Kind: KindTernary, Scale: ScaleOptimal, PerChannel: true},
		{Kind: KindUniform, Bits: 4, Scale: ScaleOptimal, PerChannel: true},
	} {
		s := MustSet(spec)
		project := func(procs int, inPlace bool) []float32 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			dst := make([]float32, len(z))
			src := z
			if inPlace {
				copy(dst, z)
				src = dst
			}
			if err := s.Project32(dst, src, l); err != nil {
				t.Fatal(err)
			}
			return dst
		}
		want := project(1, false)
		for _, inPlace := range []bool{false, true} {
			got := project(4, inPlace)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, in place %v: element %d is %v on 4 goroutines, %v on one", spec.Kind, inPlace, i, got[i], want[i])
				}
			}
		}
	}
}
