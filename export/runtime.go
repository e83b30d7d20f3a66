package export

import "fmt"

// RuntimeSource says where the runtime-memory figures of the report come from.
const RuntimeSource = "measured by bench/nbits (go run ./bench/nbits) on 2026-11-23: onnxruntime 1.30 CPU provider, 2 threads, the paper's 784-4096×3-10 MLP binarized to ±α per channel, resident memory of a process after it created the session, less that of the same graph at width 16, per float32 byte of the binarized weights (shared 2-core machine, median of 3 rounds)"

// NBitsNote is the report's statement for a file with weights in MatMulNBits.
const NBitsNote = "MatMul and Gemm weights in MatMulNBits stay at their code width in onnxruntime's memory; weights in the other formats are unpacked when the runtime loads the model (see the runtime memory lines, measured)."

// RuntimeFormat is how onnxruntime holds the binarized weights of one storage format
// at run time, by bench/nbits's measurement.
type RuntimeFormat struct {
	// Format is "packed", "qdq", "float" or "matmulnbits"; Bits the MatMulNBits width.
	Format string `json:"format"`
	Bits   int    `json:"bits,omitempty"`
	// Tensors and Float32Bytes count this file's binarized weights in the format.
	Tensors      int   `json:"tensors"`
	Float32Bytes int64 `json:"float32_bytes"`
	// MeasuredRatio is the resident bytes per float32 byte bench/nbits measured for the
	// format; 0 when it was not measured.
	MeasuredRatio float64 `json:"measured_ratio"`
	// RuntimeBytes is Float32Bytes × MeasuredRatio: what these weights are expected to
	// take in onnxruntime's memory.
	RuntimeBytes int64 `json:"runtime_bytes"`
	// HeldAs says what onnxruntime keeps.
	HeldAs string `json:"held_as"`
}

// measuredRuntime returns the ratio and description bench/nbits measured for a format
// (see RuntimeSource); ok is false for a combination it did not measure.
func measuredRuntime(format string, bits int) (ratio float64, heldAs string, ok bool) {
	// bench/nbits's weights column over the 140.4 MiB of float32 weights (table in
	// docs/results/nbits/README.md).
	switch {
	case format == string(Packed):
		return 141.5 / 140.4, "float32: the unpacking subgraph is folded when the session is created", true
	case format == "float":
		return 140.9 / 140.4, "float32", true
	case format == string(QDQ):
		return 35.6 / 140.4, "int8 codes, dequantized at every run: after batch-256 runs the process held 41 MiB more than the float model's", true
	case format == string(MatMulNBits) && bits == 4:
		return 19.5 / 140.4, "4-bit codes and per-block scales, prepacked by MLAS", true
	case format == string(MatMulNBits) && bits == 2:
		return 10.4 / 140.4, "2-bit codes and per-block scales, dequantized to float32 at every run at accuracy level 1 (14-30× slower than the float model)", true
	case format == string(MatMulNBits) && bits == 8:
		return 37.2 / 140.4, "8-bit codes and per-block scales, dequantized to float32 at every run at accuracy level 1 (12-30× slower than the float model)", true
	}
	return 0, "", false
}

// runtimeMemory groups the binarized tensors by format (and MatMulNBits width) in the
// order they appear, with the measured runtime bytes.
func runtimeMemory(ts []TensorReport, bits map[string]int) []RuntimeFormat {
	var out []RuntimeFormat
	for _, t := range ts {
		if !t.Binarized {
			continue
		}
		i := 0
		for i < len(out) && (out[i].Format != t.Format || out[i].Bits != bits[t.Name]) {
			i++
		}
		if i == len(out) {
			ratio, held, ok := measuredRuntime(t.Format, bits[t.Name])
			if !ok {
				held = "not measured"
			}
			out = append(out, RuntimeFormat{Format: t.Format, Bits: bits[t.Name], MeasuredRatio: ratio, HeldAs: held})
		}
		out[i].Tensors++
		out[i].Float32Bytes += 4 * t.Count
	}
	for i := range out {
		out[i].RuntimeBytes = int64(float64(out[i].Float32Bytes) * out[i].MeasuredRatio)
	}
	return out
}

// runtimeLines are the summary's statements of runtime memory.
func (r *Report) runtimeLines() []string {
	var lines []string
	for _, f := range r.Runtime {
		name := f.Format
		if f.Bits != 0 {
			name = fmt.Sprintf("%s (%d-bit)", f.Format, f.Bits)
		}
		if f.MeasuredRatio == 0 {
			lines = append(lines, fmt.Sprintf("Runtime memory, %s: %d tensors, %s as float32; not measured.", name, f.Tensors, bytesMiB(f.Float32Bytes)))
			continue
		}
		lines = append(lines, fmt.Sprintf("Runtime memory, %s: %d tensors, %s as float32, held as %s: about %s in onnxruntime (%.3g× the float32 size, measured).",
			name, f.Tensors, bytesMiB(f.Float32Bytes), f.HeldAs, bytesMiB(f.RuntimeBytes), f.MeasuredRatio))
	}
	if len(lines) > 0 {
		lines = append(lines, "Runtime figures "+RuntimeSource+".")
	}
	return lines
}
