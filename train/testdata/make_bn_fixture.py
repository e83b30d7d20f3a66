#!/usr/bin/python3
"""Makes bn_cnn.npz, the reference for train.RecalibrateBN, with Debian's PyTorch 1.13.

Run from this folder after testmodels/make.py:  /usr/bin/python3 make_bn_fixture.py

It loads testmodels/fmnist-cnn.onnx's weights into the FMNISTCNN module of
testmodels/make.py (the initializer names are the module's state_dict keys), re-estimates the
BatchNorm running statistics with torch.optim.swa_utils.update_bn (momentum=None: the
cumulative average over batches) over testmodels/fmnist-calib.npz in file order, in batches
of 250, and stores:
  param_<name>                 every parameter the statistics were computed with (the Go test
                               loads them, so that a retrained fmnist-cnn.onnx does not
                               invalidate the fixture as long as its architecture holds)
  <bn>_running_mean, <bn>_running_var   the re-estimated statistics
"""
import importlib.util
import os

import numpy as np
import onnx
import torch
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
TM = os.path.join(HERE, "..", "..", "testmodels")

spec = importlib.util.spec_from_file_location("testmodels_make", os.path.join(TM, "make.py"))
make = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make)

m = onnx.load(os.path.join(TM, "fmnist-cnn.onnx"))
state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in m.graph.initializer}
model = make.FMNISTCNN()
missing = model.load_state_dict(state, strict=False)
assert not missing.unexpected_keys and all(k.endswith("num_batches_tracked") for k in missing.missing_keys), missing

x = torch.from_numpy(np.load(os.path.join(TM, "fmnist-calib.npz"))["x"])
out = {"param_" + k: v.numpy().copy() for k, v in state.items()}
loader = [x[i:i + 250] for i in range(0, len(x), 250)]
torch.optim.swa_utils.update_bn(loader, model)
for bn in ("bn1", "bn2"):
    out[bn + "_running_mean"] = getattr(model, bn).running_mean.numpy().copy()
    out[bn + "_running_var"] = getattr(model, bn).running_var.numpy().copy()
np.savez(os.path.join(HERE, "bn_cnn.npz"), **out)
