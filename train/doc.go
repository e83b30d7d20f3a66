// Package train fine-tunes engine graphs: losses on logits, the Adam and SGD optimizers
// with learning-rate schedules, a training loop with the hooks the ADMM family needs, held-out
// evaluation and BatchNorm re-estimation.
//
// The pieces follow PyTorch's semantics where PyTorch has an equivalent, so that numbers
// from the paper's reference code carry over: CrossEntropy is nn.CrossEntropyLoss,
// SquaredHinge is nn.MultiMarginLoss(p=2, margin=1), Distillation is Hinton's
// T²·KL(softmax(t/T) ‖ softmax(s/T)) as nn.KLDivLoss(reduction="batchmean"), MSE is
// nn.MSELoss against teacher logits; Adam and SGD follow torch.optim.Adam, AdamW and SGD
// operation for operation in float32 (the tests compare 25-step trajectories with PyTorch
// fixtures to 1e-6 relative; PyTorch fuses some multiply-adds, so bits may differ).
//
// Fit runs seeded mini-batch training. Two hooks let the ADMM family steer it without
// growing the graph: GradHook runs between the backward pass and the optimizer step (ADMM adds
// λ + ρ(x − y) to the gradients there), and EpochEnd runs after each epoch (ADMM's y- and
// λ-updates; returning ErrStop ends training). Cancelling the context stops between steps.
// Same seed, same data order and same worker count give bit-identical weights.
//
// A training run:
//
//	g, _ := engine.Build(model, engine.Options{BLAS: impl})
//	_ = g.SetTrainable(names...)
//	data, _ := calib.NewBatches(ds, calib.BatchOptions{Size: 256, Shuffle: true, Seed: 1})
//	res, err := train.Fit(ctx, g, data, train.Options{
//		Epochs:    5,
//		Loss:      train.CrossEntropy{},
//		Optimizer: train.NewAdam(train.AdamOptions{}),
//		Schedule:  train.Constant{LR: 1e-3},
//	})
//
// Data reach the loop through the Batcher interface, which *calib.Batches satisfies, so
// that this package does not depend on the data readers.
package train
