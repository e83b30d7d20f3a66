package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/qtool/qtool/export"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/onnxio/onnxpb"
)

func inspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "describe a model: versions, inputs and outputs, operators, and the parameters binarization would target",
		ArgsUsage: "model.onnx",
		UsageText: "qtool inspect [--json] model.onnx\n\n" +
			"Examples:\n" +
			"   qtool inspect testmodels/fmnist-mlp.onnx\n" +
			"   qtool inspect --json testmodels/fmnist-cnn.onnx | jq .totals",
		Description: "Prints the IR version, the opset of every domain, the producer, the inputs and outputs " +
			"with their shapes (named dimensions by name), how often each operator occurs, and every " +
			"parameter (initializers and Constant-node tensors) with its shape, element count and bytes. " +
			"Weights that binarization targets — " + targetedInputs() + " — are marked, with the axis " +
			"their output channels lie along (where per-channel scales run); the others say why they " +
			"stay in full precision (bias, normalization, other). --json prints the same as one JSON " +
			"object; its fields are documented in README.md.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("inspect takes one model file, got %d arguments; run: qtool inspect model.onnx", c.NArg())
			}
			m, err := onnxio.Load(c.Args().First())
			if err != nil {
				return err
			}
			rep := inspectModel(m)
			qs, err := export.Quantized(m)
			if err != nil {
				return err
			}
			for _, q := range qs {
				rep.Quantized = append(rep.Quantized, inspectQuantized{Name: q.Name, Format: q.Format, Bits: q.Bits,
					Levels: len(q.Levels), Scales: q.Scales, Grid: q.Grid()})
			}
			if c.Bool("json") {
				return writeJSON(c.App.Writer, rep)
			}
			return rep.print(c.App.Writer)
		},
	}
}

// inspectReport is what qtool inspect prints. Its JSON field names are part of qtool's
// interface: add fields, never rename or remove them.
type inspectReport struct {
	File      string         `json:"file"`
	IRVersion int64          `json:"ir_version"`
	Opsets    []inspectOpset `json:"opsets"`
	Producer  struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"producer"`
	Inputs  []inspectValue `json:"inputs"`
	Outputs []inspectValue `json:"outputs"`
	// Ops counts the nodes of each operator in the main graph and its subgraphs, most
	// frequent first.
	Ops    []inspectOp    `json:"ops"`
	Params []inspectParam `json:"parameters"`
	Totals inspectTotals  `json:"totals"`
	// Quantized lists the weights of a file qtool exported, each with its own grid.
	Quantized []inspectQuantized `json:"quantized,omitempty"`
}

type inspectQuantized struct {
	Name   string `json:"name"`
	Format string `json:"format"`
	Bits   int    `json:"bits,omitempty"`
	Levels int    `json:"level_count,omitempty"`
	Scales int    `json:"scales"`
	Grid   string `json:"grid"`
}

type inspectOpset struct {
	Domain  string `json:"domain"` // "ai.onnx" for the default domain
	Version int64  `json:"version"`
}

type inspectValue struct {
	Name string `json:"name"`
	// Type is the element type (FLOAT, INT64, ...) of a tensor, or the kind of a
	// non-tensor value (sequence, map, optional).
	Type string `json:"type"`
	// Shape holds one entry per dimension: a number for a fixed size, a string for a
	// named (symbolic) dimension, null for an unknown one. It is null when the shape is
	// not declared and [] for a scalar.
	Shape []any `json:"shape"`
}

type inspectOp struct {
	Op     string `json:"op"`               // operator type, prefixed by its domain when not ai.onnx
	Domain string `json:"domain,omitempty"` // "" for ai.onnx
	Count  int    `json:"count"`
}

type inspectParam struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Shape    []int64 `json:"shape"`
	Elements int64   `json:"elements"`
	Bytes    int64   `json:"bytes"`   // size of the stored data
	Storage  string  `json:"storage"` // "initializer" or "constant" (a Constant node's value)
	External bool    `json:"external"`
	// Target reports whether binarization would put the tensor on the binary grid.
	Target bool `json:"target"`
	// Role is "weight" (targeted), "bias", "normalization" or "other".
	Role string `json:"role"`
	// Reason names the read that decided the role, or says the main graph does not read
	// the tensor.
	Reason string `json:"reason"`
	// ChannelAxis is the axis of a target's output channels, along which per-channel
	// grids keep one scale per index; absent when no single axis holds them (the grid
	// then keeps one scale for the tensor) and for parameters that are not targets.
	ChannelAxis *int `json:"channel_axis,omitempty"`
}

type inspectTotals struct {
	Params         int   `json:"parameters"`
	Elements       int64 `json:"elements"`
	Bytes          int64 `json:"bytes"`
	TargetParams   int   `json:"target_parameters"`
	TargetElements int64 `json:"target_elements"`
	TargetBytes    int64 `json:"target_bytes"`
}

func inspectModel(m *onnxio.Model) *inspectReport {
	mp := m.Proto
	rep := &inspectReport{File: m.Name, IRVersion: mp.GetIrVersion()}
	rep.Producer.Name = mp.GetProducerName()
	rep.Producer.Version = mp.GetProducerVersion()
	for _, o := range mp.GetOpsetImport() {
		d := o.GetDomain()
		if d == "" {
			d = "ai.onnx"
		}
		rep.Opsets = append(rep.Opsets, inspectOpset{Domain: d, Version: o.GetVersion()})
	}
	for _, v := range m.Inputs() {
		rep.Inputs = append(rep.Inputs, describeValue(v))
	}
	for _, v := range m.Outputs() {
		rep.Outputs = append(rep.Outputs, describeValue(v))
	}
	rep.Ops = countOps(mp.GetGraph())

	roles := m.ParamRoles()
	for _, p := range m.Params() {
		t := p.Tensor
		ip := inspectParam{
			Name:     p.Name,
			Type:     onnxio.DataType(t.GetDataType()).String(),
			Shape:    append([]int64{}, t.GetDims()...),
			Elements: elements(t.GetDims()),
			Bytes:    onnxio.TensorBytes(t),
			Storage:  "initializer",
			External: t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL,
		}
		if p.Node != nil {
			ip.Storage = "constant"
		}
		c := roles[p.Name]
		ip.Role = c.Role.String()
		ip.Target = c.Role == onnxio.RoleWeight
		ip.Reason = reason(m, p.Name, c)
		if ip.Target {
			if axis, err := c.Use.ChannelAxis(t.GetDims()); err == nil {
				ip.ChannelAxis = &axis
			}
		}
		rep.Params = append(rep.Params, ip)

		rep.Totals.Params++
		rep.Totals.Elements += ip.Elements
		rep.Totals.Bytes += ip.Bytes
		if ip.Target {
			rep.Totals.TargetParams++
			rep.Totals.TargetElements += ip.Elements
			rep.Totals.TargetBytes += ip.Bytes
		}
	}
	return rep
}

// targetedInputs lists the weight inputs of the layer schema's linear operators, e.g.
// "input 1 of Conv, …, inputs 0 and 1 of MatMul, when they are floating-point parameters".
func targetedInputs() string {
	var parts []string
	for _, l := range onnxio.Layers() {
		if !l.Linear() {
			continue
		}
		ins := l.Inputs(onnxio.RoleWeight)
		word := "input"
		if len(ins) > 1 {
			word = "inputs"
		}
		nums := make([]string, len(ins))
		for i, in := range ins {
			nums[i] = fmt.Sprint(in)
		}
		list := strings.Join(nums, ", ")
		if len(nums) > 1 {
			list = strings.Join(nums[:len(nums)-1], ", ") + " and " + nums[len(nums)-1]
		}
		parts = append(parts, fmt.Sprintf("%s %s of %s", word, list, l.Op))
	}
	return strings.Join(parts, ", ") + ", when they are floating-point parameters"
}

func describeValue(v onnxio.ValueType) inspectValue {
	iv := inspectValue{Name: v.Name, Type: v.Kind}
	if v.Kind == "tensor" || v.Kind == "sparse_tensor" {
		iv.Type = v.Elem.String()
		if v.Kind == "sparse_tensor" {
			iv.Type = "sparse " + iv.Type
		}
	}
	if v.Ranked {
		iv.Shape = make([]any, len(v.Shape))
		for i, d := range v.Shape {
			switch {
			case d.Fixed:
				iv.Shape[i] = d.Value
			case d.Param != "":
				iv.Shape[i] = d.Param
			}
		}
	}
	return iv
}

// countOps counts the nodes of g and of the subgraphs its nodes hold.
func countOps(g *onnxpb.GraphProto) []inspectOp {
	counts := map[[2]string]int{}
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		for _, n := range g.GetNode() {
			d := n.GetDomain()
			if d == "ai.onnx" {
				d = ""
			}
			counts[[2]string{d, n.GetOpType()}]++
			for _, a := range n.GetAttribute() {
				walk(a.GetG())
				for _, sg := range a.GetGraphs() {
					walk(sg)
				}
			}
		}
	}
	walk(g)
	ops := make([]inspectOp, 0, len(counts))
	for k, n := range counts {
		op := k[1]
		if k[0] != "" {
			op = k[0] + "." + k[1]
		}
		ops = append(ops, inspectOp{Op: op, Domain: k[0], Count: n})
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Count != ops[j].Count {
			return ops[i].Count > ops[j].Count
		}
		return ops[i].Op < ops[j].Op
	})
	return ops
}

// elements multiplies dims; the loader has already refused negative or overflowing ones.
func elements(dims []int64) int64 {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// reason says which read decided a parameter's role, or who reads a kept "other".
func reason(m *onnxio.Model, name string, c onnxio.Classification) string {
	u := c.Use
	if u.Node == nil {
		uses := m.Consumers(name)
		if len(uses) == 0 {
			return "not read by the main graph"
		}
		u = uses[0]
	}
	return fmt.Sprintf("input %d of %s", u.Input, nodeLabel(u.Node))
}

func nodeLabel(n *onnxpb.NodeProto) string {
	op := n.GetOpType()
	if d := n.GetDomain(); d != "" && d != "ai.onnx" {
		op = d + "." + op
	}
	if n.GetName() != "" {
		return fmt.Sprintf("%s %q", op, n.GetName())
	}
	if len(n.GetOutput()) > 0 {
		return fmt.Sprintf("%s (output %q)", op, n.GetOutput()[0])
	}
	return op
}

func (v inspectValue) shapeString() string {
	if v.Shape == nil {
		return "?"
	}
	parts := make([]string, len(v.Shape))
	for i, d := range v.Shape {
		if d == nil {
			parts[i] = "?"
		} else {
			parts[i] = fmt.Sprint(d)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func dimsString(dims []int64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// print writes the report for people: one section per part, aligned in columns.
func (r *inspectReport) print(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "model\t%s\n", r.File)
	fmt.Fprintf(w, "IR version\t%d\n", r.IRVersion)
	opsets := make([]string, len(r.Opsets))
	for i, o := range r.Opsets {
		opsets[i] = fmt.Sprintf("%s %d", o.Domain, o.Version)
	}
	fmt.Fprintf(w, "opsets\t%s\n", strings.Join(opsets, ", "))
	producer := strings.TrimSpace(r.Producer.Name + " " + r.Producer.Version)
	if producer == "" {
		producer = "(not recorded)"
	}
	fmt.Fprintf(w, "producer\t%s\n", producer)
	if err := w.Flush(); err != nil {
		return err
	}

	for _, sec := range []struct {
		title string
		vs    []inspectValue
	}{{"inputs", r.Inputs}, {"outputs", r.Outputs}} {
		fmt.Fprintf(out, "\n%s (%d)\n", sec.title, len(sec.vs))
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, v := range sec.vs {
			fmt.Fprintf(w, "  %s\t%s\t%s\n", v.Name, v.Type, v.shapeString())
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}

	nodes := 0
	for _, o := range r.Ops {
		nodes += o.Count
	}
	fmt.Fprintf(out, "\noperators (%d nodes, %d types)\n", nodes, len(r.Ops))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, o := range r.Ops {
		fmt.Fprintf(w, "  %s\t%d\n", o.Op, o.Count)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\nparameters (%d)\n", len(r.Params))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(r.Params) > 0 {
		fmt.Fprintf(w, "  NAME\tTYPE\tSHAPE\tELEMENTS\tBYTES\tBINARIZE\tWHY\n")
	}
	for _, p := range r.Params {
		mark := "keep"
		if p.Target {
			mark = "TARGET"
		}
		name := p.Name
		if p.Storage == "constant" {
			name += " (Constant)"
		}
		if p.External {
			name += " (external)"
		}
		why := p.Role + ": " + p.Reason
		if p.ChannelAxis != nil {
			why += fmt.Sprintf(", channels on axis %d", *p.ChannelAxis)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%s\t%s\t%s\n", name, p.Type, dimsString(p.Shape), p.Elements, byteSize(p.Bytes), mark, why)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	t := r.Totals
	share := 0.0
	if t.Bytes > 0 {
		share = 100 * float64(t.TargetBytes) / float64(t.Bytes)
	}
	fmt.Fprintf(out, "\ntotals\n")
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "  parameters\t%d\t%d elements\t%s\n", t.Params, t.Elements, byteSize(t.Bytes))
	fmt.Fprintf(w, "  binarization targets\t%d\t%d elements\t%s (%.1f%% of parameter bytes)\n", t.TargetParams, t.TargetElements, byteSize(t.TargetBytes), share)
	if err := w.Flush(); err != nil {
		return err
	}
	if len(r.Quantized) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nquantized by qtool (%d)\n", len(r.Quantized))
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  NAME\tFORMAT\tBITS\tGRID")
	for _, q := range r.Quantized {
		fmt.Fprintf(w, "  %s\t%s\t%d\t%s\n", q.Name, q.Format, q.Bits, q.Grid)
	}
	return w.Flush()
}

// byteSize formats a byte count exactly, with a binary-prefixed approximation for large
// ones.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%d B (%.2f GiB)", n, float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d B (%.2f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d B (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
