package binarize

import (
	"context"
	"runtime"
	"testing"

	"github.com/qtool/qtool/calib"
	"github.com/qtool/qtool/engine"
	"github.com/qtool/qtool/onnxio"
	"github.com/qtool/qtool/train"
)

// cnnGraphs returns fmnist-cnn's teacher and a student with every float parameter
// trainable, and 512 calibration samples.
func cnnGraphs(t *testing.T) (student, teacher *engine.Graph, d calib.Dataset, sample []int) {
	t.Helper()
	m, err := onnxio.Load("../testmodels/fmnist-cnn.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if teacher, err = engine.Build(m, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	if student, err = engine.Build(m, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range student.Params() {
		if p.Value.DType == engine.Float32 {
			names = append(names, p.Name)
		}
	}
	if err := student.SetTrainable(names...); err != nil {
		t.Fatal(err)
	}
	d, err = calib.Open("../testmodels/fmnist-calib.npz", calib.Options{Input: InputOf(teacher), Limit: 512, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, v := range d.SampleShape() {
		sample = append(sample, int(v))
	}
	return student, teacher, d, sample
}

// TestMicroBatchForEqualPieces: under a limit that does not fit the batch, the micro-batch
// splits it into equal pieces, the need fits the limit's accounted share, and one piece
// fewer would not.
func TestMicroBatchForEqualPieces(t *testing.T) {
	student, teacher, _, sample := cnnGraphs(t)
	full, err := TrainNeed(student, teacher, sample, split(256, 500, 256), 0)
	if err != nil {
		t.Fatal(err)
	}
	limit := int64(float64(full.Total()) / accountShare / 3)
	sh, need, err := MicroBatchFor(student, teacher, sample, 256, 500, 0, limit, "cnn")
	if err != nil {
		t.Fatal(err)
	}
	if sh.Micro >= 256 || 256%sh.Micro > 0 && train.MicroSize(256, sh.Micro) != sh.Micro {
		t.Fatalf("micro-batch %d of 256: want equal pieces below the batch", sh.Micro)
	}
	if sh.Last != train.MicroSize(500%256, sh.Micro) {
		t.Errorf("last batch's pieces %d, want %d", sh.Last, train.MicroSize(500%256, sh.Micro))
	}
	if need.Total() > int64(accountShare*float64(limit)) {
		t.Errorf("need %d over the accounted share of the limit %d", need.Total(), limit)
	}
	pieces := (256 + sh.Micro - 1) / sh.Micro
	fewer, err := TrainNeed(student, teacher, sample, split(256, 500, (256+pieces-2)/(pieces-1)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if fewer.Total() <= int64(accountShare*float64(limit)) {
		t.Errorf("%d pieces would fit too (need %d): MicroBatchFor did not take the largest micro-batch", pieces-1, fewer.Total())
	}
}

// TestTrainNeedCoversAllocations trains and evaluates fmnist-cnn in micro-batches, with
// the graphs' plan caches bounded as Run bounds them, and checks by the Go heap that what
// stays allocated (the plans of every batch size used, Adam's state) is within what
// TrainNeed counted, and not far below it: the accounting is neither blind nor idle.
func TestTrainNeedCoversAllocations(t *testing.T) {
	student, teacher, d, sample := cnnGraphs(t)
	sh := split(256, 500, 64)
	need, err := TrainNeed(student, teacher, sample, sh, 0)
	if err != nil {
		t.Fatal(err)
	}
	sl, tl := need.limits(need.Total())
	student.SetMaxBytes(sl)
	teacher.SetMaxBytes(tl)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ctx := context.Background()
	b, err := calib.NewBatches(d, calib.BatchOptions{Size: 256, Shuffle: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := train.Fit(ctx, student, b, train.Options{Epochs: 1, Loss: train.Distillation{}, Teacher: teacher,
		Optimizer: train.NewAdam(train.AdamOptions{}), MicroBatch: sh.Micro}); err != nil {
		t.Fatal(err)
	}
	// Inference at other sizes too: the caches drop plans rather than grow.
	for _, size := range []int{64, 50, 30} {
		eb, err := calib.NewBatches(d, calib.BatchOptions{Size: size})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := train.Evaluate(ctx, student, eb, train.EvalOptions{Reference: teacher}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(student) // their plans are what is measured
	runtime.KeepAlive(teacher)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	counted := sl + tl + need.Params // the caches' bounds: what Run holds them to
	t.Logf("live growth %d bytes; counted: plans %d + %d, parameter copies %d", grew, need.Student, need.Teacher, need.Params)
	if grew > counted+counted/4 {
		t.Errorf("training kept %d bytes allocated, over 1.25× the %d TrainNeed counts", grew, counted)
	}
	if grew < (need.Student+need.Teacher)/4 {
		t.Errorf("training kept %d bytes allocated, under a quarter of the %d bytes of plans counted", grew, need.Student+need.Teacher)
	}
}
