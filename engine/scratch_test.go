package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// scratchConvModel chains convolutions whose passes take every scratch layout of
// backwardDirect and forwardWinograd: 2-D windows padded, strided, dilated and grouped
// (colᵀ built channel-last), 32 → 16 channels on a 14 × 13 plane (Winograd where the CPU
// runs it), a pointwise layer, and a 3-D window (colᵀ by transposing the column matrix).
func scratchConvModel(r *rand.Rand, threeD bool) (*onnxio.Model, []int) {
	type conv struct {
		c, m, k, s, d, g int
	}
	layers := []conv{{4, 32, 3, 1, 1, 1}, {32, 16, 3, 1, 1, 1}, {16, 8, 3, 2, 1, 1}, {8, 6, 1, 1, 1, 1}, {6, 8, 3, 1, 2, 2}, {8, 8, 3, 1, 1, 8}}
	x := []int{6, 4, 14, 13}
	if threeD {
		layers = []conv{{4, 6, 3, 1, 1, 1}, {6, 5, 3, 2, 1, 1}}
		x = []int{4, 4, 5, 6, 7}
	}
	var nodes []*onnxpb.NodeProto
	var inits []*onnxpb.TensorProto
	in := "x"
	for i, l := range layers {
		ws := []int64{int64(l.m), int64(l.c / l.g)}
		var ks, pads, strides, dil []int64
		for range len(x) - 2 {
			ws = append(ws, int64(l.k))
			ks, strides, dil = append(ks, int64(l.k)), append(strides, int64(l.s)), append(dil, int64(l.d))
		}
		p := int64(l.d * (l.k - 1) / 2)
		for range 2 * (len(x) - 2) {
			pads = append(pads, p)
		}
		w, b := string(rune('a'+i))+"w", string(rune('a'+i))+"b"
		inits = append(inits, randParam(r, 0.5, w, ws...), randParam(r, 0.5, b, int64(l.m)))
		out := string(rune('a'+i)) + "y"
		nodes = append(nodes, gNode("Conv", []string{in, w, b}, []string{out}, attrInts("kernel_shape", ks...),
			attrInts("pads", pads...), attrInts("strides", strides...), attrInts("dilations", dil...), attrI("group", int64(l.g))))
		in = out
	}
	dims := make([]int64, len(x))
	for i, v := range x {
		dims[i] = int64(v)
	}
	return gModel(13, nodes, []*onnxpb.ValueInfoProto{gInput("x", onnxpb.TensorProto_FLOAT, dims...)}, []string{in}, inits...), x
}

// TestScratchArenaExact: the convolutions' backward scratch shared by a graph's kernels
// (scratch.go) gives bit for bit the gradients of scratch kept per kernel, also when the
// shared scratch starts full of NaN (a value read before the call wrote it would carry
// into the gradients), on fmnist-cnn, fmnist-resnet and chains of unusual convolutions;
// and the arena is used (its NaN overwritten) wherever the direct path runs.
func TestScratchArenaExact(t *testing.T) {
	type setup struct {
		name  string
		build func() (*onnxio.Model, *Tensor, *Tensor)
	}
	synth := func(threeD bool) func() (*onnxio.Model, *Tensor, *Tensor) {
		return func() (*onnxio.Model, *Tensor, *Tensor) {
			r := rand.New(rand.NewPCG(7, 7))
			m, x := scratchConvModel(r, threeD)
			xa, xb := nntRand(r, x, -1, 1), nntRand(r, x, -1, 1)
			return m, xa, xb
		}
	}
	setups := []setup{{"conv2d", synth(false)}, {"conv3d", synth(true)}}
	for _, model := range []string{"fmnist-cnn", "fmnist-resnet"} {
		setups = append(setups, setup{model, func() (*onnxio.Model, *Tensor, *Tensor) {
			m, _, x, _ := loadTestModel(t, model, "fmnist-calib.npz")
			return m, rows(x, 0, 40), rows(x, 40, 80)
		}})
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			var grads [3][]float32
			for vi, mode := range []string{"own", "shared", "poisoned"} {
				m, xa, xb := s.build()
				g, err := Build(m, Options{Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				g.noArena = mode == "own"
				if mode == "poisoned" {
					g.arena.buf = make([]float32, 1<<22)
					for i := range g.arena.buf {
						g.arena.buf[i] = float32(math.NaN())
					}
				}
				trainFloats(t, g)
				ctx := &Context{Training: true}
				g.ZeroGrad()
				for _, x := range []*Tensor{xa, xb} {
					o, err := g.Forward(ctx, x)
					if err != nil {
						t.Fatal(err)
					}
					gy := NewFloat(o[0].Shape, make([]float32, len(o[0].F)))
					for i := range gy.F {
						gy.F[i] = float32(i%7) - 3
					}
					if err := g.Backward(ctx, gy); err != nil {
						t.Fatal(err)
					}
				}
				for _, p := range g.Params() {
					if p.Grad != nil {
						grads[vi] = append(grads[vi], p.Grad.F...)
					}
				}
				switch mode {
				case "own":
					if g.arena.buf != nil {
						t.Fatalf("noArena: the arena holds %d values", len(g.arena.buf))
					}
				case "poisoned":
					used := 0
					for _, v := range g.arena.buf {
						if !math.IsNaN(float64(v)) {
							used++
						}
					}
					// Without the tile kernel (purego, CPUs without AVX2 and FMA) the
					// convolutions run through im2col and the BLAS, which take no scratch.
					if used == 0 && convDirectOK() {
						t.Fatal("the backward passes did not use the shared scratch")
					}
					t.Logf("%d of the arena's values written", used)
				}
			}
			for vi := 1; vi < 3; vi++ {
				if len(grads[vi]) != len(grads[0]) || len(grads[0]) == 0 {
					t.Fatalf("%d and %d gradient values", len(grads[vi]), len(grads[0]))
				}
				for i, v := range grads[vi] {
					if math.Float32bits(v) != math.Float32bits(grads[0][i]) {
						t.Fatalf("variant %d: gradient [%d] = %v, %v with scratch kept per kernel", vi, i, v, grads[0][i])
					}
				}
			}
		})
	}
}
