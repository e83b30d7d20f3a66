#!/usr/bin/env python3
"""Export torchvision's DenseNet-121 at 32x32 the way PyTorch 1.13 writes merged
initializers, with the BatchNorm re-estimation PyTorch computes, for TestRecalibrateDenseNet.

usage: make_densenet.py OUTDIR   (writes densenet121-32.onnx and densenet121-32.npz)

The file is 32 MB, so the test generates it under .cache/ instead of committing it.
The model is in eval mode and exported with TrainingMode.PRESERVE, which keeps all 121
BatchNorm nodes; the running statistics are the fresh ones (zeros and ones), so the
exporter merges them into Identity nodes of a few shared tensors -- among them BatchNorm
scales and shifts -- as it does for pretrained models whose statistics coincide. The scales
and shifts are drawn at random so that each node keeps its own and is named after its
module. The .npz holds the input x [8, 3, 32, 32] and, for each BatchNorm module M,
"M.running_mean" and "M.running_var" after torch.optim.swa_utils.update_bn over x in
batches of 4 (the cumulative average of batch means and unbiased batch variances)."""
import sys, os
import numpy as np
import torch, torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
m = torchvision.models.densenet121(weights=None)
for mod in m.modules():
    if isinstance(mod, torch.nn.BatchNorm2d):
        with torch.no_grad():
            mod.weight.uniform_(0.5, 1.5)
            mod.bias.uniform_(-0.2, 0.2)
m.eval()
x = torch.randn(8, 3, 32, 32)
torch.onnx.export(m, x[:2], os.path.join(out, "densenet121-32.onnx"), opset_version=13,
                  training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                  input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
loader = [x[i:i + 4] for i in range(0, 8, 4)]
torch.optim.swa_utils.update_bn(loader, m)
arrays = {"x": x.numpy()}
for name, mod in m.named_modules():
    if isinstance(mod, torch.nn.BatchNorm2d):
        arrays[name + ".running_mean"] = mod.running_mean.numpy()
        arrays[name + ".running_var"] = mod.running_var.numpy()
np.savez(os.path.join(out, "densenet121-32.npz"), **arrays)
