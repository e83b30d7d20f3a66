"""Reference for binarize.RandomInit: PyTorch 1.13's default initialisation of the
fmnist-cnn, fmnist-resnet and fmnist-mlp architectures (testmodels/make.py), per parameter:
the fan_in torch.nn.init._calculate_fan_in_and_fan_out gives, the bound of the uniform
distribution reset_parameters draws from (kaiming_uniform(a=sqrt(5)) for weights, which is
1/sqrt(fan_in), and 1/sqrt(fan_in) for biases), and the statistics of one draw (max |w|,
standard deviation), or the constant a BatchNorm tensor starts at. Parameter names are
PyTorch's, which the ONNX files keep.

    /usr/bin/python3 binarize/testdata/torch_init.py > binarize/testdata/torch_init.json

Debian's /usr/bin/python3 with python3-torch (1.13).
"""
import importlib.util
import json
import math
import os

import sys
import types

import torch
import torch.nn as nn

# make.py imports sklearn only to locate the digits CSV; the architectures do not need it.
if "sklearn" not in sys.modules:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        sys.modules["sklearn"] = types.SimpleNamespace(__file__="/nonexistent/sklearn/__init__.py")

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("make", os.path.join(HERE, "..", "..", "testmodels", "make.py"))
make = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make)

torch.manual_seed(0)
out = {"torch": torch.__version__, "models": {}}
for name, model in [("fmnist-cnn", make.FMNISTCNN()), ("fmnist-resnet", make.FMNISTResNet()), ("fmnist-mlp", make.FMNISTMLP(width=256))]:
    rows = {}
    for mname, mod in model.named_modules():
        prefix = mname + "." if mname else ""
        if isinstance(mod, (nn.Conv2d, nn.Linear, nn.ConvTranspose2d)):
            fan_in, _ = nn.init._calculate_fan_in_and_fan_out(mod.weight)
            # What reset_parameters computes: kaiming_uniform with a = sqrt(5).
            gain = nn.init.calculate_gain("leaky_relu", math.sqrt(5))
            bound = math.sqrt(3.0) * gain / math.sqrt(fan_in)
            w = mod.weight.detach()
            rows[prefix + "weight"] = {"kind": "weight", "fan_in": fan_in, "bound": bound,
                                       "max_abs": w.abs().max().item(), "std": w.std().item(), "n": w.numel()}
            if mod.bias is not None:
                b = mod.bias.detach()
                rows[prefix + "bias"] = {"kind": "bias", "fan_in": fan_in, "bound": 1 / math.sqrt(fan_in),
                                         "max_abs": b.abs().max().item(), "std": b.std().item() if b.numel() > 1 else 0.0, "n": b.numel()}
        elif isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            for p, v in [("weight", mod.weight), ("bias", mod.bias), ("running_mean", mod.running_mean), ("running_var", mod.running_var)]:
                vals = sorted(set(v.detach().flatten().tolist()))
                assert len(vals) == 1
                rows[prefix + p] = {"kind": "constant", "value": vals[0], "n": v.numel()}
    out["models"][name] = rows
print(json.dumps(out, indent=1, sort_keys=True))
