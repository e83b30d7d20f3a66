package export

import (
	"errors"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"
)

// flagName matches a command-line flag such as --opset, which export's messages never name.
var flagName = regexp.MustCompile(`--[a-z]`)

// TestPackBruteForce packs random codes at every width and reads each code back bit by
// bit from the bytes, and through the LUT rows as the unpacking subgraph does.
func TestPackBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, bits := range []int{1, 2, 4, 8} {
		levels := make([]int, 1<<bits)
		for i := range levels {
			levels[i] = 3*i - 5
		}
		for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000} {
			codes := make([]uint8, n)
			for i := range codes {
				codes[i] = uint8(rng.IntN(1 << bits))
			}
			data, err := Pack(codes, bits)
			if err != nil {
				t.Fatal(err)
			}
			if want := (n*bits + 7) / 8; len(data) != want {
				t.Fatalf("%d bits, %d codes: %d bytes, want %d", bits, n, len(data), want)
			}
			for i, c := range codes {
				var got uint8
				for k := range bits {
					bit := i*bits + k
					got |= (data[bit/8] >> (bit % 8) & 1) << k
				}
				if got != c {
					t.Fatalf("%d bits: code %d reads back as %d, want %d", bits, i, got, c)
				}
			}
			for bit := n * bits; bit < len(data)*8; bit++ {
				if data[bit/8]>>(bit%8)&1 != 0 {
					t.Fatalf("%d bits, %d codes: padding bit %d is set", bits, n, bit)
				}
			}
			back, err := Unpack(data, bits, n)
			if err != nil {
				t.Fatal(err)
			}
			lut := LUT(levels, bits)
			per := 8 / bits
			for i, c := range codes {
				if back[i] != c {
					t.Fatalf("%d bits: Unpack gives code %d at %d, want %d", bits, back[i], i, c)
				}
				if v := lut[int(data[i/per])*per+i%per]; v != float32(levels[c]) {
					t.Fatalf("%d bits: LUT gives %v at %d, want level %d", bits, v, i, levels[c])
				}
			}
		}
	}
}

func TestPackErrors(t *testing.T) {
	if _, err := Pack([]uint8{0, 2}, 1); err == nil || !strings.Contains(err.Error(), "index 1") {
		t.Fatalf("a 2 packed at 1 bit: err = %v", err)
	}
	if _, err := Pack(nil, 3); err == nil {
		t.Fatal("3-bit packing accepted")
	}
	if _, err := Unpack([]byte{1}, 1, 9); err == nil {
		t.Fatal("9 codes unpacked from one byte")
	}
}

// TestCodesExact checks that values on the grid give their codes, including zero
// scales and per-channel layouts, and that Values inverts Codes bit for bit.
func TestCodesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dims := []int64{3, 4, 5}
	for axis := range dims {
		g := Grid{Levels: []int{-3, -1, 0, 1, 3}, Axis: axis}
		for range dims[axis] {
			g.Scales = append(g.Scales, float32(rng.Float64()))
		}
		g.Scales[0] = 0
		codes := make([]uint8, 60)
		for i := range codes {
			codes[i] = uint8(rng.IntN(5))
		}
		vals := g.Values(codes, dims)
		got, err := g.Codes(vals, dims)
		if err != nil {
			t.Fatal(err)
		}
		back := g.Values(got, dims)
		for i := range vals {
			if math.Float32bits(back[i]) != math.Float32bits(vals[i]) {
				t.Fatalf("axis %d: value %d: %v → code %d → %v", axis, i, vals[i], got[i], back[i])
			}
			// Codes may pick another level only where the scale is 0.
			if got[i] != codes[i] && vals[i] != 0 {
				t.Fatalf("axis %d: value %d: code %d, want %d", axis, i, got[i], codes[i])
			}
		}
	}
}

func TestCodesErrors(t *testing.T) {
	dims := []int64{2, 3}
	bin := Grid{Levels: []int{-1, 1}, Scales: []float32{0.5, 0.25}, Axis: 0}
	cases := []struct {
		name   string
		g      Grid
		values []float32
		want   string
	}{
		{"off grid", bin, []float32{0.5, -0.5, 0.5, 0.25, 0.3, 0.25}, "value 0.3 at index 4 ([1 1])"},
		{"one ulp off", bin, []float32{0.5, -0.5, 0.5, 0.25, 0.25, math.Nextafter32(0.25, 1)}, "at index 5"},
		{"wrong channel's scale", bin, []float32{0.25, -0.5, 0.5, 0.25, 0.25, 0.25}, "at index 0"},
		{"NaN", bin, []float32{float32(math.NaN()), -0.5, 0.5, 0.25, 0.25, 0.25}, "value NaN at index 0"},
		{"negative zero", Grid{Levels: []int{-1, 0, 1}, Scales: []float32{1}}, []float32{1, float32(math.Copysign(0, -1)), 1, 1, 1, 1}, "at index 1"},
		{"count", bin, []float32{0.5}, "1 values for shape [2 3]"},
		{"scales", Grid{Levels: []int{-1, 1}, Scales: []float32{1, 1, 1}, Axis: 0}, make([]float32, 6), "3 scales for 2 channels"},
		{"axis", Grid{Levels: []int{-1, 1}, Scales: []float32{1, 1}, Axis: 2}, make([]float32, 6), "axis 2 is out of range"},
		{"negative scale", Grid{Levels: []int{-1, 1}, Scales: []float32{-1}}, make([]float32, 6), "want a finite scale"},
		{"unsorted", Grid{Levels: []int{1, -1}}, make([]float32, 6), "not distinct and increasing"},
		{"no levels", Grid{}, make([]float32, 6), "0 levels"},
		{"unscaled", Grid{Levels: []int{-1, 1}}, []float32{1, 1, 1, 1, 1, 0.5}, "value 0.5 at index 5"},
	}
	for _, c := range cases {
		_, err := c.g.Codes(c.values, dims)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.want)
		}
	}
}

// TestExportErrors checks the one-line errors for bad requests: they name the model and
// tensor and say what to do in Options' terms, never naming a command-line flag; opset
// errors are *OpsetError with the opsets at fault.
func TestExportErrors(t *testing.T) {
	m := smallNet(3, 9, 1)
	ones := make([]float32, 20)
	for i := range ones {
		ones[i] = 1
	}
	w := Weight{Name: "mm.w", Values: ones, Grid: Grid{Levels: []int{-1, 1}}}
	bad := ones[:19]
	cases := []struct {
		name  string
		ws    []Weight
		opts  Options
		want  string
		opset *OpsetError
	}{
		{"qdq at opset 9", []Weight{w}, Options{Format: QDQ}, "set Options.Opset to 10 or later", &OpsetError{Model: m.Name, Format: QDQ, Have: 9, Need: 10}},
		{"lower opset", []Weight{w}, Options{Opset: 8}, "export never lowers an opset", &OpsetError{Model: m.Name, Have: 8, Requested: true, Need: 9}},
		{"beyond 21", []Weight{w}, Options{Opset: 22}, "beyond 21", &OpsetError{Model: m.Name, Have: 22, Requested: true}},
		{"unknown", []Weight{{Name: "nope", Values: ones, Grid: w.Grid}}, Options{}, `no parameter named "nope"`, nil},
		{"twice", []Weight{w, w}, Options{}, `"mm.w" is given twice`, nil},
		{"count", []Weight{{Name: "mm.w", Values: bad, Grid: w.Grid}}, Options{}, `small.onnx: tensor "mm.w": 19 values for shape [4 5]`, nil},
		{"format", []Weight{w}, Options{Format: "int2"}, `unknown format "int2"`, nil},
		{"int8 range", []Weight{{Name: "mm.w", Values: ones, Grid: Grid{Levels: []int{-200, 1}}}}, Options{Format: QDQ, Opset: 13}, "do not fit int8", nil},
	}
	for _, c := range cases {
		_, err := Export(m, c.ws, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: err = %v, want one line mentioning %q", c.name, err, c.want)
			continue
		}
		if flagName.MatchString(err.Error()) {
			t.Errorf("%s: message names a flag: %v", c.name, err)
		}
		var oe *OpsetError
		if errors.As(err, &oe) != (c.opset != nil) || (c.opset != nil && *oe != *c.opset) {
			t.Errorf("%s: err = %#v, want %#v", c.name, oe, c.opset)
		}
	}
	// A model whose graph uses an operator that changed meaning across the raise.
	sm := smallNet(7, 12, 1)
	sm.Proto.Graph.Node = append(sm.Proto.Graph.Node, &onnxpb.NodeProto{OpType: proto.String("Softmax"), Name: proto.String("sm"), Input: []string{"y"}, Output: []string{"z"}})
	if _, err := Export(sm, []Weight{w}, Options{Opset: 13}); err == nil || !strings.Contains(err.Error(), `node "sm" (Softmax) changed at opset 13`) {
		t.Errorf("raising across Softmax-13: err = %v", err)
	}
	if _, err := Export(sm, []Weight{w}, Options{}); err != nil {
		t.Errorf("keeping opset 12 with Softmax: %v", err)
	}
	old := smallNet(3, 8, 1)
	var oe *OpsetError
	if _, err := Export(old, []Weight{w}, Options{}); !errors.As(err, &oe) || *oe != (OpsetError{Model: old.Name, Have: 8, Need: MinOpset}) || flagName.MatchString(err.Error()) {
		t.Errorf("opset 8: err = %v", err)
	}
}
