package testmodels

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sbinet/npyio/npz"
	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/onnxio/onnxpb"

	"github.com/qtool/qtool/internal/testenv"
)

const fmnistDir = "/usr/share/datasets/fashion-mnist"

type accuracy struct {
	Correct        int     `json:"correct"`
	Total          int     `json:"total"`
	Accuracy       float64 `json:"accuracy"`
	SubsetFile     string  `json:"subset_file"`
	SubsetCorrect  int     `json:"subset_correct"`
	SubsetTotal    int     `json:"subset_total"`
	SubsetAccuracy float64 `json:"subset_accuracy"`
}

func readAccuracy(t *testing.T) map[string]accuracy {
	t.Helper()
	b, err := os.ReadFile("accuracy.json")
	if err != nil {
		t.Fatal(err)
	}
	var acc map[string]accuracy
	if err := json.Unmarshal(b, &acc); err != nil {
		t.Fatalf("accuracy.json: %v", err)
	}
	want := []string{"digits-mlp", "fmnist-cnn", "fmnist-mlp", "fmnist-resnet"}
	got := make([]string, 0, len(acc))
	for k := range acc {
		got = append(got, k)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("accuracy.json lists %v, want %v", got, want)
	}
	return acc
}

func openNPZ(t *testing.T, path string) *npz.Reader {
	t.Helper()
	r, err := npz.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readArray reads key k (a float32 or int64 array) and checks its shape.
func readArray[T float32 | int64](t *testing.T, r *npz.Reader, file, key string, shape []int) []T {
	t.Helper()
	h := r.Header(key + ".npy")
	if h == nil {
		t.Fatalf("%s: no key %q", file, key)
	}
	if !slices.Equal(h.Descr.Shape, shape) {
		t.Fatalf("%s: %s has shape %v, want %v", file, key, h.Descr.Shape, shape)
	}
	var v []T
	if err := r.Read(key+".npy", &v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return v
}

func loadModel(t *testing.T, b []byte) *onnxpb.ModelProto {
	t.Helper()
	var m onnxpb.ModelProto
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// argmaxCorrect counts the rows of logits [n,10] whose largest entry is at the label.
func argmaxCorrect(logits []float32, labels []int64) int {
	correct := 0
	for i, y := range labels {
		row := logits[i*10 : (i+1)*10]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if int64(best) == y {
			correct++
		}
	}
	return correct
}

func requireAsset(t *testing.T, path, install string) {
	t.Helper()
	testenv.RequireFile(t, path, install)
}

// readIdx reads a gzipped MNIST-format idx file of unsigned bytes.
func readIdx(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) < 4 || b[2] != 0x08 {
		return nil, fmt.Errorf("%s: not an unsigned-byte idx file", path)
	}
	return b[4+4*int(b[3]):], nil
}

// The embedded calibration subset is exactly the first 1000 Fashion-MNIST test images /255 and
// their labels, checked against the dataset's own idx files.
func TestFMNISTCalibMatchesIdx(t *testing.T) {
	const install = "apt-get install -y dataset-fashion-mnist"
	images := filepath.Join(fmnistDir, "t10k-images-idx3-ubyte.gz")
	labels := filepath.Join(fmnistDir, "t10k-labels-idx1-ubyte.gz")
	requireAsset(t, images, install)
	requireAsset(t, labels, install)
	pix, err := readIdx(images)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := readIdx(labels)
	if err != nil {
		t.Fatal(err)
	}

	r, err := npz.NewReader(bytes.NewReader(FMNISTCalib), int64(len(FMNISTCalib)))
	if err != nil {
		t.Fatal(err)
	}
	x := readArray[float32](t, r, "FMNISTCalib", "x", []int{1000, 1, 28, 28})
	y := readArray[int64](t, r, "FMNISTCalib", "y", []int{1000})
	for i, v := range x {
		if want := float32(pix[i]) / 255; v != want {
			t.Fatalf("x[%d] = %v, want pixel %d / 255 = %v", i, v, pix[i], want)
		}
	}
	for i, v := range y {
		if v != int64(lab[i]) {
			t.Fatalf("y[%d] = %d, want %d", i, v, lab[i])
		}
	}

	disk, err := os.ReadFile("fmnist-calib.npz")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, FMNISTCalib) {
		t.Fatal("embedded FMNISTCalib differs from fmnist-calib.npz")
	}
}

// The embedded default model keeps the conventions that the CLI and other packages rely on.
func TestFMNISTMLPConventions(t *testing.T) {
	m := loadModel(t, FMNISTMLP)
	if n := len(m.GetOpsetImport()); n != 1 || m.GetOpsetImport()[0].GetVersion() != 13 {
		t.Errorf("opsets %v, want ai.onnx 13 only", m.GetOpsetImport())
	}
	g := m.GetGraph()
	in, out := g.GetInput(), g.GetOutput()
	if len(in) != 1 || in[0].GetName() != "input" || len(out) != 1 || out[0].GetName() != "logits" {
		t.Fatalf("inputs %v, outputs %v; want one each named input and logits", in, out)
	}
	dims := in[0].GetType().GetTensorType().GetShape().GetDim()
	if len(dims) != 2 || dims[0].GetDimParam() != "batch" || dims[1].GetDimValue() != 784 {
		t.Errorf("input shape %v, want [batch, 784]", dims)
	}
	ops := map[string]int{}
	for _, n := range g.GetNode() {
		ops[n.GetOpType()]++
		if n.GetOpType() == "Gemm" {
			transB := false
			for _, a := range n.GetAttribute() {
				transB = transB || (a.GetName() == "transB" && a.GetI() == 1)
			}
			if !transB {
				t.Errorf("Gemm %s has no transB=1", n.GetName())
			}
		}
	}
	for op, want := range map[string]int{"Gemm": 4, "BatchNormalization": 4, "Relu": 3, "Dropout": 4} {
		if ops[op] != want {
			t.Errorf("%d %s nodes, want %d", ops[op], op, want)
		}
	}
	inits := map[string][]int64{}
	for _, ti := range g.GetInitializer() {
		inits[ti.GetName()] = ti.GetDims()
	}
	for name, want := range map[string][]int64{
		"fc1.weight": {256, 784}, "fc1.bias": {256}, "bn1.weight": {256}, "bn1.running_var": {256},
		"fc4.weight": {10, 256}, "bn4.running_mean": {10},
	} {
		if !slices.Equal(inits[name], want) {
			t.Errorf("initializer %s has dims %v, want %v", name, inits[name], want)
		}
	}
	disk, err := os.ReadFile("fmnist-mlp.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(disk, FMNISTMLP) {
		t.Fatal("embedded FMNISTMLP differs from fmnist-mlp.onnx")
	}
}

// paramDims maps every initializer and Constant output of a model to its dims.
func paramDims(m *onnxpb.ModelProto) map[string][]int64 {
	dims := map[string][]int64{}
	for _, ti := range m.GetGraph().GetInitializer() {
		dims[ti.GetName()] = ti.GetDims()
	}
	for _, n := range m.GetGraph().GetNode() {
		if n.GetOpType() == "Constant" && len(n.GetAttribute()) == 1 {
			dims[n.GetOutput()[0]] = n.GetAttribute()[0].GetT().GetDims()
		}
	}
	return dims
}

// Every model listed in accuracy.json has its file, its fixtures agree with the recorded subset
// accuracy, and every gradient key names a tensor of the model with the same shape.
func TestFixturesAgreeWithAccuracyJSON(t *testing.T) {
	for name, acc := range readAccuracy(t) {
		t.Run(name, func(t *testing.T) {
			if acc.Correct > acc.Total || acc.SubsetCorrect > acc.SubsetTotal ||
				acc.Accuracy != roundTo6(float64(acc.Correct)/float64(acc.Total)) ||
				acc.SubsetAccuracy != roundTo6(float64(acc.SubsetCorrect)/float64(acc.SubsetTotal)) {
				t.Fatalf("inconsistent accuracy.json entry %+v", acc)
			}
			b, err := os.ReadFile(name + ".onnx")
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 2<<20 {
				t.Errorf("%s.onnx is %d bytes, over 2 MB", name, len(b))
			}
			dims := paramDims(loadModel(t, b))

			sub := openNPZ(t, acc.SubsetFile)
			y := readArray[int64](t, sub, acc.SubsetFile, "y", []int{acc.SubsetTotal})
			logitsFile := filepath.Join("fixtures", name+"-logits.npz")
			logits := readArray[float32](t, openNPZ(t, logitsFile), logitsFile, "logits", []int{acc.SubsetTotal, 10})
			if got := argmaxCorrect(logits, y); got != acc.SubsetCorrect {
				t.Errorf("%s: %d correct, accuracy.json says %d", logitsFile, got, acc.SubsetCorrect)
			}

			gradsFile := filepath.Join("fixtures", name+"-grads.npz")
			g := openNPZ(t, gradsFile)
			seen := map[string]int{}
			for _, key := range g.Keys() {
				key = strings.TrimSuffix(key, ".npy")
				variant, tensor, ok := strings.Cut(key, "/")
				if !ok {
					if key != "loss_eval" && key != "loss_bntrain" {
						t.Errorf("%s: unexpected key %q", gradsFile, key)
					}
					readArray[float32](t, g, gradsFile, key, []int{})
					continue
				}
				want, ok := dims[tensor]
				if !ok || (variant != "eval" && variant != "bntrain") {
					t.Errorf("%s: key %q names no tensor of %s.onnx", gradsFile, key, name)
					continue
				}
				shape := make([]int, len(want))
				for i, d := range want {
					shape[i] = int(d)
				}
				readArray[float32](t, g, gradsFile, key, shape)
				seen[tensor]++
			}
			for tensor, n := range seen {
				if n != 2 {
					t.Errorf("%s: %s has %d variants, want eval and bntrain", gradsFile, tensor, n)
				}
			}
			if len(seen) == 0 {
				t.Errorf("%s: no gradients", gradsFile)
			}
		})
	}
}

func roundTo6(v float64) float64 {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	r, _ := strconv.ParseFloat(s, 64)
	return r
}

// digits-test.csv holds the same samples as digits-test.npz.
func TestDigitsCSVMatchesNPZ(t *testing.T) {
	r := openNPZ(t, "digits-test.npz")
	y := readArray[int64](t, r, "digits-test.npz", "y", []int{450})
	x := readArray[float32](t, r, "digits-test.npz", "x", []int{450, 64})

	f, err := os.Open("digits-test.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("digits-test.csv: %v", err)
	}
	if len(rows) != len(y)+1 || len(rows[0]) != 65 || rows[0][0] != "f0" || rows[0][64] != "label" {
		t.Fatalf("digits-test.csv: %d rows, header %v; want a header f0..f63,label and %d rows", len(rows), rows[0], len(y))
	}
	for i, row := range rows[1:] {
		for j := range 64 {
			v, err := strconv.ParseFloat(row[j], 32)
			if err != nil || float32(v) != x[i*64+j] {
				t.Fatalf("digits-test.csv row %d column %d = %q, npz has %v", i+1, j, row[j], x[i*64+j])
			}
		}
		if row[64] != strconv.FormatInt(y[i], 10) {
			t.Fatalf("digits-test.csv row %d label %q, npz has %d", i+1, row[64], y[i])
		}
	}
}
