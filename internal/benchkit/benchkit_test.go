package benchkit

import (
	"slices"
	"testing"
)

func TestCPUModel(t *testing.T) {
	const two = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\nmodel name\t: AMD EPYC 9B45\n\nprocessor\t: 1\ncpu family\t: 6\nmodel\t\t: 207\nmodel name\t: Intel(R) Xeon(R) Processor\n"
	if got, want := cpuModel([]byte(two)), "AMD EPYC 9B45 (family 26, model 2)"; got != want {
		t.Errorf("cpuModel = %q, want %q (the first processor's fields)", got, want)
	}
	if got := cpuModel([]byte("processor\t: 0\nBogoMIPS\t: 50.00\n")); got != "unknown CPU" {
		t.Errorf("cpuModel without a model name = %q, want unknown CPU", got)
	}
	if got := cpuModel([]byte("model name\t: ARMv8 Processor\n")); got != "ARMv8 Processor" {
		t.Errorf("cpuModel without family = %q", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1.2, 0.75, 0.9, 1.02, 2}, 1.02},
	} {
		in := append([]float64(nil), c.v...)
		if got := Median(c.v); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", in, got, c.want)
		}
		if !slices.Equal(in, c.v) {
			t.Errorf("Median changed its argument: %v, was %v", c.v, in)
		}
	}
}
