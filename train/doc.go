// Package train fine-tunes engine graphs: losses on logits, the Adam and SGD optimizers
// with learning-rate schedules, a training loop with the hooks the ADMM family needs, held-out
// evaluation and BatchNorm re-estimation.
//
// The pieces follow PyTorch's semantics where PyTorch has an equivalent, so that numbers
// from the paper's reference code carry over: CrossEntropy is nn.CrossEntropyLoss,
// SquaredHinge is nn.MultiMarginLoss(p=2, margin=1), Distillation is Hinton's
// T²·KL(softmax(t/T) ‖ softmax(s/T)) as nn.KLDivLoss(reduction="batchmean"), MSE is
// nn.MSELoss against teacher logits; Adam and SGD update parameters exactly as
// torch.optim.Adam, AdamW and SGD do (the tests compare trajectories with PyTorch fixtures).
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
