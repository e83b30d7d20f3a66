package export

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/proto"

	"github.com/qtool/qtool/internal/atomicfile"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

// RuntimeNote is the report's plain statement of where the saving is.
const RuntimeNote = "The weights are unpacked when the runtime loads the model: the saving is on disk and in transfer, not in runtime memory."

// Report compares a full-precision model with its quantized export. Its JSON field names
// are part of qtool's interface: add fields, never rename or remove them.
type Report struct {
	Original  string         `json:"original"`
	Quantized string         `json:"quantized"`
	Tensors   []TensorReport `json:"tensors"`
	Totals    Totals         `json:"totals"`
	// Paper counts as the ADMM-Q paper did: trainable parameters only.
	Paper PaperCount `json:"paper_count"`
	// Difference explains how the whole file differs from the paper's count.
	Difference []string `json:"difference"`
	Note       string   `json:"note"`
	// Runtime says, per storage format in the file, what its binarized weights take in
	// onnxruntime's memory, by the measurement RuntimeSource cites.
	Runtime       []RuntimeFormat `json:"runtime_memory"`
	RuntimeSource string          `json:"runtime_source"`
}

// TensorReport is one parameter of the original model.
type TensorReport struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	Count int64   `json:"count"`
	// OriginalBytes is the tensor's data size in the original file.
	OriginalBytes int64 `json:"original_bytes"`
	// StoredBytes is the size of what holds its values in the quantized file: the
	// packed codes, the integer tensor, or the float tensor.
	StoredBytes int64 `json:"stored_bytes"`
	// ScaleBytes is the size of its scales (and zero points), if any.
	ScaleBytes int64 `json:"scale_bytes"`
	// BitsPerWeight is StoredBytes·8/Count, padding of the last byte included.
	BitsPerWeight float64 `json:"bits_per_weight"`
	// Binarized reports whether the tensor was put on a grid (binary, ternary or k-bit).
	Binarized bool `json:"binarized"`
	// Changed reports a kept tensor whose values differ from the original's, such as a
	// bias fine-tuned or BatchNorm statistics re-estimated with the binary weights.
	Changed bool `json:"changed,omitempty"`
	// Format is "packed", "qdq", "float" or "matmulnbits" for quantized tensors and
	// "fp32" (or the stored type) for kept ones.
	Format string `json:"format"`
	// Role is "weight", "bias", "normalization" or "other".
	Role string `json:"role"`
	// Reason says why a tensor was kept in full precision; empty for binarized ones.
	Reason string `json:"reason,omitempty"`
	// Grid names a quantized tensor's grid and Why says why it was chosen, when the
	// caller gave them (CompareOptions.Grids): files whose tensors have different grids.
	Grid string `json:"grid,omitempty"`
	Why  string `json:"why,omitempty"`
}

// Totals are the whole-model figures.
type Totals struct {
	TensorBytesBefore int64 `json:"tensor_bytes_before"`
	TensorBytesAfter  int64 `json:"tensor_bytes_after"`
	// UnpackBytes are the unpacking constants: LUTs and shape and index tensors.
	UnpackBytes int64 `json:"unpack_bytes"`
	ScaleBytes  int64 `json:"scale_bytes"`
	// FileBytesBefore and FileBytesAfter are the sizes on disk, external data included.
	FileBytesBefore int64 `json:"file_bytes_before"`
	FileBytesAfter  int64 `json:"file_bytes_after"`
	// SavedPercent is 100·(1 − FileBytesAfter/FileBytesBefore).
	SavedPercent float64 `json:"saved_percent"`
	// Ratio is FileBytesBefore/FileBytesAfter.
	Ratio float64 `json:"ratio"`
	// BinarizedWeights and BinarizedBytesBefore count the binarized tensors.
	BinarizedWeights     int64 `json:"binarized_weights"`
	BinarizedBytesBefore int64 `json:"binarized_bytes_before"`
	// Theoretical1Bit is the original file with every binarized weight at exactly one
	// bit and nothing added: no scales, no unpacking constants.
	Theoretical1Bit int64 `json:"theoretical_1bit_bytes"`
	// Overhead1Bit is FileBytesAfter − Theoretical1Bit: what the file costs beyond it.
	Overhead1Bit int64 `json:"overhead_over_1bit_bytes"`
}

// PaperCount counts as the paper's table did: only trainable parameters (weights,
// biases, normalisation scale and shift), each in float32, the binarized weights at
// their code width, in MiB (2^20 bytes).
type PaperCount struct {
	Parameters   int64   `json:"parameters"`
	BytesBefore  int64   `json:"bytes_before"`
	BytesAfter   int64   `json:"bytes_after"`
	MiBBefore    float64 `json:"mib_before"`
	MiBAfter     float64 `json:"mib_after"`
	SavedPercent float64 `json:"saved_percent"`
}

// CompareOptions configures Compare.
type CompareOptions struct {
	// Reasons gives, by tensor name, why a tensor was kept in full precision, such as
	// "excluded by the user"; other kept tensors get a reason from the nodes that read them.
	Reasons map[string]string
	// Grids gives, by tensor name, a quantized tensor's grid and why it was chosen
	// (TensorReport.Grid and Why); the tables then show them.
	Grids map[string]GridChoice
}

// GridChoice is a tensor's grid and the reason it was chosen.
type GridChoice struct {
	Grid, Why string
}

// Compare builds the storage report of quant, the export of orig. The paths are the
// files on disk whose sizes the report gives.
func Compare(orig, quant *onnxio.Model, origPath, quantPath string, opts CompareOptions) (*Report, error) {
	before, err := diskSize(orig, origPath)
	if err != nil {
		return nil, err
	}
	after, err := diskSize(quant, quantPath)
	if err != nil {
		return nil, err
	}
	r := &Report{Original: origPath, Quantized: quantPath, Note: RuntimeNote}
	r.Totals.FileBytesBefore, r.Totals.FileBytesAfter = before, after
	qparams := map[string]onnxio.Param{}
	for _, p := range quant.Params() {
		qparams[p.Name] = p
		r.Totals.TensorBytesAfter += onnxio.TensorBytes(p.Tensor)
	}
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range quant.Proto.GetGraph().GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	roles := orig.ParamRoles()
	unpack := map[string]bool{}
	listed, err := quantizedNames(quant)
	if err != nil {
		return nil, err
	}
	nbits, err := nbitsNodes(quant)
	if err != nil {
		return nil, err
	}
	width := map[string]int{}
	for _, p := range orig.Params() {
		role := roles[p.Name]
		tr := TensorReport{
			Name:          p.Name,
			Shape:         slices64(p.Tensor.GetDims()),
			Count:         count(p.Tensor.GetDims()),
			OriginalBytes: onnxio.TensorBytes(p.Tensor),
			Role:          role.Role.String(),
		}
		r.Totals.TensorBytesBefore += tr.OriginalBytes
		if qp, ok := qparams[p.Name]; ok {
			tr.StoredBytes = onnxio.TensorBytes(qp.Tensor)
			if listed[p.Name] {
				// Same name, grid values: the float format.
				tr.Binarized, tr.Format = true, "float"
			} else {
				tr.Format = strings.ToLower(onnxio.DataType(qp.Tensor.GetDataType()).String())
				if tr.Format == "float" {
					tr.Format = "fp32"
				}
				tr.Reason = keptReason(p.Name, role, opts.Reasons)
				tr.Changed = valuesDiffer(orig, quant, p.Tensor, qp.Tensor)
			}
		} else if n, ok := nbits[p.Name]; ok {
			// The codes feed the MatMulNBits node that replaced the weight's reader.
			for i, in := range n.GetInput() {
				if qp, ok := qparams[in]; ok && i >= 1 && i <= 3 {
					if i == 1 {
						tr.StoredBytes += onnxio.TensorBytes(qp.Tensor)
					} else {
						tr.ScaleBytes += onnxio.TensorBytes(qp.Tensor)
					}
				}
			}
			tr.Binarized, tr.Format = true, string(MatMulNBits)
			for _, a := range n.GetAttribute() {
				if a.GetName() == "bits" {
					width[p.Name] = int(a.GetI())
				}
			}
		} else if n, ok := producer[p.Name]; ok {
			if err := traceUnpack(quant, n, producer, qparams, &tr, unpack); err != nil {
				return nil, fmt.Errorf("export: report: %s: tensor %q: %w", quant.Name, p.Name, err)
			}
			tr.Binarized = true
		} else {
			return nil, fmt.Errorf("export: report: %s has no tensor %q of %s; compare a model with its own export", quant.Name, p.Name, orig.Name)
		}
		if c, ok := opts.Grids[p.Name]; ok && tr.Binarized {
			tr.Grid, tr.Why = c.Grid, c.Why
		}
		if tr.Count > 0 {
			tr.BitsPerWeight = float64(tr.StoredBytes) * 8 / float64(tr.Count)
		}
		if tr.Binarized {
			r.Totals.BinarizedWeights += tr.Count
			r.Totals.BinarizedBytesBefore += tr.OriginalBytes
			r.Totals.Theoretical1Bit += (tr.Count + 7) / 8
		}
		r.Totals.ScaleBytes += tr.ScaleBytes
		r.Tensors = append(r.Tensors, tr)
	}
	for name := range unpack {
		r.Totals.UnpackBytes += onnxio.TensorBytes(qparams[name].Tensor)
	}
	t := &r.Totals
	t.Theoretical1Bit += before - t.BinarizedBytesBefore
	t.Overhead1Bit = after - t.Theoretical1Bit
	if before > 0 {
		t.SavedPercent = 100 * (1 - float64(after)/float64(before))
	}
	if after > 0 {
		t.Ratio = float64(before) / float64(after)
	}
	r.Paper = paperCount(r.Tensors, roles)
	r.Difference = r.explain(roles)
	r.Runtime, r.RuntimeSource = runtimeMemory(r.Tensors, width), RuntimeSource
	if len(nbits) > 0 {
		r.Note = NBitsNote
	}
	return r, nil
}

// quantizedNames reads the names export recorded under "qtool.tensors".
func quantizedNames(m *onnxio.Model) (map[string]bool, error) {
	names, err := quantizedList(m)
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out, err
}

// quantizedList reads the names export recorded under "qtool.tensors", in their order.
func quantizedList(m *onnxio.Model) ([]string, error) {
	var out []string
	for _, p := range m.Proto.GetMetadataProps() {
		if p.GetKey() != metaTensors {
			continue
		}
		var names []string
		if err := json.Unmarshal([]byte(p.GetValue()), &names); err != nil {
			return nil, fmt.Errorf("export: report: %s: metadata %s is not a JSON list of names: %v", m.Name, metaTensors, err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// nbitsNodes returns, for each weight export stored in MatMulNBits, the node that reads
// its codes, from the names recorded under "qtool.matmulnbits".
func nbitsNodes(m *onnxio.Model) (map[string]*onnxpb.NodeProto, error) {
	out := map[string]*onnxpb.NodeProto{}
	for _, p := range m.Proto.GetMetadataProps() {
		if p.GetKey() != metaNBits {
			continue
		}
		var names map[string]string
		if err := json.Unmarshal([]byte(p.GetValue()), &names); err != nil {
			return nil, fmt.Errorf("export: report: %s: metadata %s is not a JSON object of names: %v", m.Name, metaNBits, err)
		}
		for _, n := range m.Proto.GetGraph().GetNode() {
			for w, node := range names {
				if n.GetName() == node && n.GetOpType() == "MatMulNBits" && n.GetDomain() == MSDomain {
					out[w] = n
				}
			}
		}
		for w, node := range names {
			if out[w] == nil {
				return nil, fmt.Errorf("export: report: %s: no MatMulNBits node %q reads weight %q", m.Name, node, w)
			}
		}
	}
	return out, nil
}

// diskSize is the model file's size plus that of the external data files it uses.
func diskSize(m *onnxio.Model, path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("export: report: %w", err)
	}
	size := st.Size()
	seen := map[string]bool{}
	for _, p := range m.Params() {
		for _, e := range p.Tensor.GetExternalData() {
			if e.GetKey() != "location" || seen[e.GetValue()] {
				continue
			}
			seen[e.GetValue()] = true
			est, err := os.Stat(filepath.Join(m.Dir, e.GetValue()))
			if errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("export: report: %s: external data %s is missing", path, e.GetValue())
			} else if err != nil {
				return 0, fmt.Errorf("export: report: %w", err)
			}
			size += est.Size()
		}
	}
	return size, nil
}

// traceUnpack walks the nodes that compute a replaced parameter back to the constants
// they read, and sorts those into stored values, scales and unpacking constants.
func traceUnpack(m *onnxio.Model, n *onnxpb.NodeProto, producer map[string]*onnxpb.NodeProto, params map[string]onnxio.Param, tr *TensorReport, unpack map[string]bool) error {
	err := walkUnpack(n, producer, params, func(op string, i int, in string, p onnxio.Param) error {
		size := onnxio.TensorBytes(p.Tensor)
		switch {
		case op == "Cast" && i == 0, op == "DequantizeLinear" && i == 0:
			tr.StoredBytes += size
			tr.Format = "packed"
			if op == "DequantizeLinear" {
				tr.Format = "qdq"
			}
		case op == "Mul", op == "DequantizeLinear":
			tr.ScaleBytes += size
		default:
			unpack[in] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if tr.Format == "" {
		return errors.New("no stored values found behind it")
	}
	return nil
}

// walkUnpack calls visit for every constant the nodes computing n's outputs read, with
// the reading node's operator and input index, walking back through computed inputs.
func walkUnpack(n *onnxpb.NodeProto, producer map[string]*onnxpb.NodeProto, params map[string]onnxio.Param, visit func(op string, i int, in string, p onnxio.Param) error) error {
	seen := map[*onnxpb.NodeProto]bool{}
	var walk func(n *onnxpb.NodeProto) error
	walk = func(n *onnxpb.NodeProto) error {
		if seen[n] {
			return nil
		}
		seen[n] = true
		for i, in := range n.GetInput() {
			if in == "" {
				continue
			}
			if p, ok := params[in]; ok {
				if err := visit(n.GetOpType(), i, in, p); err != nil {
					return err
				}
				continue
			}
			pn, ok := producer[in]
			if !ok {
				return fmt.Errorf("node %q reads %q, which is neither a constant nor computed: not an export's unpacking subgraph", n.GetName(), in)
			}
			if err := walk(pn); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(n)
}

func keptReason(name string, c onnxio.Classification, given map[string]string) string {
	if r, ok := given[name]; ok {
		return r
	}
	switch c.Role {
	case onnxio.RoleWeight:
		return "weight not selected for binarization"
	case onnxio.RoleBias:
		return fmt.Sprintf("bias (input %d of %s %q): kept in full precision", c.Use.Input, c.Use.Node.GetOpType(), c.Use.Node.GetName())
	case onnxio.RoleNorm:
		return fmt.Sprintf("normalisation (input %d of %s %q): kept in full precision", c.Use.Input, c.Use.Node.GetOpType(), c.Use.Node.GetName())
	}
	return "not the weight of a linear operator"
}

// trainable reports whether the paper's count includes the parameter: weights and
// biases, and the scale and shift of normalisations — not running statistics.
func trainable(c onnxio.Classification) bool {
	switch c.Role {
	case onnxio.RoleWeight, onnxio.RoleBias:
		return true
	case onnxio.RoleNorm:
		return c.Use.Input == 1 || c.Use.Input == 2
	}
	return false
}

func paperCount(ts []TensorReport, roles map[string]onnxio.Classification) PaperCount {
	var pc PaperCount
	for _, t := range ts {
		if !trainable(roles[t.Name]) {
			continue
		}
		pc.Parameters += t.Count
		pc.BytesBefore += 4 * t.Count
		if t.Binarized {
			// Whole bits per weight, as the paper's 1-bit figure: the code width.
			pc.BytesAfter += (t.Count*int64(codeBits(t)) + 7) / 8
		} else {
			pc.BytesAfter += 4 * t.Count
		}
	}
	pc.MiBBefore = float64(pc.BytesBefore) / (1 << 20)
	pc.MiBAfter = float64(pc.BytesAfter) / (1 << 20)
	if pc.BytesBefore > 0 {
		pc.SavedPercent = 100 * (1 - float64(pc.BytesAfter)/float64(pc.BytesBefore))
	}
	return pc
}

// codeBits is the whole number of bits per weight the tensor is stored with.
func codeBits(t TensorReport) int {
	if t.Count == 0 {
		return 0
	}
	return int(t.StoredBytes * 8 / t.Count)
}

// explain accounts for the difference between the paper's count and the file.
func (r *Report) explain(roles map[string]onnxio.Classification) []string {
	var stats, other int64
	for _, t := range r.Tensors {
		if trainable(roles[t.Name]) {
			continue
		}
		if roles[t.Name].Role == onnxio.RoleNorm {
			stats += t.StoredBytes
		} else {
			other += t.StoredBytes
		}
	}
	accounted := r.Paper.BytesAfter + stats + other + r.Totals.UnpackBytes + r.Totals.ScaleBytes
	overhead := r.Totals.FileBytesAfter - accounted
	return []string{
		fmt.Sprintf("The paper counts %d trainable parameters (weights, biases, normalisation scale and shift): %s after binarization.", r.Paper.Parameters, bytesMiB(r.Paper.BytesAfter)),
		fmt.Sprintf("The file also holds %s of normalisation running statistics (mean and variance), %s of other constants, %s of scales and %s of unpacking constants (LUTs, shapes).", bytesMiB(stats), bytesMiB(other), bytesMiB(r.Totals.ScaleBytes), bytesMiB(r.Totals.UnpackBytes)),
		fmt.Sprintf("The remaining %s is the ONNX format itself: graph, names, types and protobuf framing.", bytesMiB(overhead)),
	}
}

func bytesMiB(b int64) string {
	return fmt.Sprintf("%d B (%.2f MiB)", b, float64(b)/(1<<20))
}

func slices64(d []int64) []int64 { return append([]int64{}, d...) }

func count(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as a terminal table.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "storage report: %s → %s\n\n", r.Original, r.Quantized)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	grids := r.hasGrids()
	head := "tensor\tshape\tcount\tbytes before\tbytes after\tbits/weight\tscale bytes\tformat\t"
	if grids {
		head += "grid\t"
	}
	fmt.Fprintln(tw, head)
	for _, t := range r.Tensors {
		fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%d\t%.3g\t%d\t%s\t", t.Name, t.Shape, t.Count, t.OriginalBytes, t.StoredBytes, t.BitsPerWeight, t.ScaleBytes, t.Format)
		if grids {
			fmt.Fprintf(tw, "%s\t", t.Grid)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if grids {
		fmt.Fprintln(w)
		for _, t := range r.Tensors {
			if t.Why != "" {
				fmt.Fprintf(w, "grid of %s: %s\n", t.Name, t.Why)
			}
		}
	}
	fmt.Fprintln(w)
	for _, t := range r.keptSorted() {
		changed := ""
		if t.Changed {
			changed = " (values changed, e.g. fine-tuned or re-estimated)"
		}
		fmt.Fprintf(w, "kept %s: %s%s\n", t.Name, t.Reason, changed)
	}
	fmt.Fprintln(w)
	for _, l := range r.summary() {
		fmt.Fprintln(w, l)
	}
	return nil
}

// WriteMarkdown writes the report as Markdown.
func (r *Report) WriteMarkdown(w io.Writer) error {
	fmt.Fprintf(w, "# Storage report\n\n`%s` → `%s`\n\n", r.Original, r.Quantized)
	if r.hasGrids() {
		fmt.Fprintln(w, "| tensor | shape | count | bytes before | bytes after | bits/weight | scale bytes | format | grid | why |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|---|---|---|")
	} else {
		fmt.Fprintln(w, "| tensor | shape | count | bytes before | bytes after | bits/weight | scale bytes | format | kept because |")
		fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|---|---|")
	}
	for _, t := range r.Tensors {
		fmt.Fprintf(w, "| `%s` | %v | %d | %d | %d | %.3g | %d | %s | ", t.Name, t.Shape, t.Count, t.OriginalBytes, t.StoredBytes, t.BitsPerWeight, t.ScaleBytes, t.Format)
		if r.hasGrids() {
			why := t.Why
			if !t.Binarized {
				why = t.Reason
			}
			fmt.Fprintf(w, "%s | %s |\n", t.Grid, why)
		} else {
			fmt.Fprintf(w, "%s |\n", t.Reason)
		}
	}
	fmt.Fprintln(w)
	for _, l := range r.summary() {
		fmt.Fprintf(w, "- %s\n", l)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "**%s**\n", r.Note)
	return nil
}

// WriteFiles writes the report as JSON to jsonPath and as Markdown to mdPath, each
// atomically.
func (r *Report) WriteFiles(jsonPath, mdPath string) error {
	if err := atomicfile.Write(jsonPath, r.WriteJSON); err != nil {
		return fmt.Errorf("export: report: %w", err)
	}
	if err := atomicfile.Write(mdPath, r.WriteMarkdown); err != nil {
		return fmt.Errorf("export: report: %w", err)
	}
	return nil
}

// hasGrids reports a report with per-tensor grids (CompareOptions.Grids).
func (r *Report) hasGrids() bool {
	for _, t := range r.Tensors {
		if t.Grid != "" {
			return true
		}
	}
	return false
}

func (r *Report) keptSorted() []TensorReport {
	var kept []TensorReport
	for _, t := range r.Tensors {
		if !t.Binarized {
			kept = append(kept, t)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Role < kept[j].Role })
	return kept
}

func (r *Report) summary() []string {
	t, p := r.Totals, r.Paper
	lines := []string{
		fmt.Sprintf("Tensors: %d B before, %d B after (unpacking constants %d B, scales %d B).", t.TensorBytesBefore, t.TensorBytesAfter, t.UnpackBytes, t.ScaleBytes),
		fmt.Sprintf("Files on disk: %d B before, %d B after: %.2f %% saved (%.1f× smaller).", t.FileBytesBefore, t.FileBytesAfter, t.SavedPercent, t.Ratio),
		fmt.Sprintf("Theoretical 1-bit file (binarized weights at exactly 1 bit, nothing added): %d B; this file is %d B (%.2f %%) above it.", t.Theoretical1Bit, t.Overhead1Bit, 100*float64(t.Overhead1Bit)/float64(max(t.Theoretical1Bit, 1))),
		fmt.Sprintf("Counted as the paper did (trainable parameters in float32, binarized weights at their code width): %.2f MiB → %.2f MiB, %.2f %% saved.", p.MiBBefore, p.MiBAfter, p.SavedPercent),
	}
	lines = append(lines, r.Difference...)
	lines = append(lines, r.runtimeLines()...)
	return append(lines, r.Note)
}

// valuesDiffer reports whether two tensors hold different values. A tensor written back
// by qtool may change representation (typed fields to raw_data, say) without changing a
// value, which a protobuf comparison would call a change.
func valuesDiffer(om, qm *onnxio.Model, a, b *onnxpb.TensorProto) bool {
	if proto.Equal(a, b) {
		return false
	}
	ta, errA := om.Tensor(a)
	tb, errB := qm.Tensor(b)
	if errA != nil || errB != nil || !slices.Equal(ta.Dims, tb.Dims) || len(ta.Float) != len(tb.Float) || !slices.Equal(ta.Int, tb.Int) {
		return true
	}
	for i, v := range ta.Float {
		if math.Float32bits(v) != math.Float32bits(tb.Float[i]) {
			return true
		}
	}
	return false
}
