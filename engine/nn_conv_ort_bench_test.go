//go:build cgo

package engine

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/qtool/qtool/internal/ortref"
)

// benchOrt runs onnxruntime on a test model at batch 256 with as many intra-op threads
// as GOMAXPROCS and no spinning, and reports samples/s and CPU ms per batch like
// benchModel, so that the two compare in the same conditions:
//
//	go test ./engine -run '^$' -bench 'Infer(CNN|ResNet)'
//
// On a machine shared with other jobs the CPU time per batch is the steadier measure.
func benchOrt(b *testing.B, name string) {
	ortref.Require(b)
	path := filepath.Join(testmodelsDir, name+".onnx")
	s, err := ortref.NewSessionFile(path, ortref.Options{IntraOpThreads: runtime.GOMAXPROCS(0), NoSpinning: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var x []float32
	if _, err := npzArray(filepath.Join(testmodelsDir, "fmnist-calib.npz"), "x", &x); err != nil {
		b.Fatal(err)
	}
	const batch = 256
	xb := make([]float32, batch*784)
	for i := range xb {
		xb[i] = x[i%len(x)]
	}
	in := []ortref.Tensor{{Name: s.InputNames()[0], Shape: []int64{batch, 1, 28, 28}, Data: xb}}
	if _, err := s.Run(in); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	cpu := benchCPU()
	for i := 0; i < b.N; i++ {
		if _, err := s.Run(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "samples/s")
	b.ReportMetric((benchCPU()-cpu)*1e3/float64(b.N), "cpu-ms/op")
}

func BenchmarkOrtInferCNN(b *testing.B)    { benchOrt(b, "fmnist-cnn") }
func BenchmarkOrtInferResNet(b *testing.B) { benchOrt(b, "fmnist-resnet") }
