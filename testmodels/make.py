#!/usr/bin/python3
# make.py trains and exports the small full-precision ONNX models, data subsets and PyTorch
# fixtures that qtool's tests run against. It was run once; its outputs are committed next to it,
# and this file is kept for provenance.
#
# How to run it (from the repository root; 10-20 minutes on one core, no network):
#
#     apt-get install -y python3-torch python3-onnx python3-sklearn dataset-fashion-mnist
#     /usr/bin/python3 testmodels/make.py
#
# It needs Debian's /usr/bin/python3 with python3-torch (PyTorch 1.13), python3-onnx (onnx 1.12),
# python3-sklearn (only for the UCI digits CSV it ships) and dataset-fashion-mnist
# (/usr/share/datasets/fashion-mnist); a pyenv or virtualenv python3 on PATH will not have them.
# Every seed is fixed. It overwrites the files in testmodels/ and testmodels/fixtures/.
#
# Conventions the Go tests rely on:
#   - image inputs are pixel/255 in [0,1] (float32, no mean/std normalisation); digits inputs are
#     value/16 in [0,1];
#   - every model has one input named "input" and one output named "logits", with a symbolic
#     batch dimension named "batch";
#   - BatchNormalization is never fused into the weights, and parameters keep their PyTorch names
#     (fc1.weight, bn1.running_mean, ...) as ONNX initializer names (Constant output names in
#     digits-mlp.onnx).

import copy
import gzip
import json
import os
import time
import zipfile

import numpy as np
import onnx
import sklearn
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
FMNIST_DIR = "/usr/share/datasets/fashion-mnist"
DIGITS_CSV = os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data", "digits.csv.gz")

SEED = 20210413  # every seed below derives from this one
CALIB_N = 1000  # Fashion-MNIST test images shipped as fmnist-calib.npz
GRAD_BATCH = 32  # first samples of the shipped subset used for the gradient fixtures
MAX_ONNX_BYTES = 2 << 20

FMNIST_CLASSES = [
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
]


# ---------------------------------------------------------------------------------------------
# Data


def read_idx(path):
    """Reads a gzipped MNIST-format idx file into a numpy array of its stored shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte idx file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {arr.size} bytes of data for shape {shape}")
    return arr.reshape(shape)


def load_fmnist():
    """Returns (x_train, y_train, x_test, y_test); x float32 [n,1,28,28] = pixel/255, y int64."""
    out = []
    for split in ("train", "t10k"):
        x = read_idx(os.path.join(FMNIST_DIR, f"{split}-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(FMNIST_DIR, f"{split}-labels-idx1-ubyte.gz"))
        out.append((x.astype(np.float32) / np.float32(255)).reshape(-1, 1, 28, 28))
        out.append(y.astype(np.int64))
    return tuple(out)


def load_digits():
    """Returns a fixed, seeded 75/25 train/test split of the UCI digits (x = value/16)."""
    with gzip.open(DIGITS_CSV, "rt") as f:
        raw = np.loadtxt(f, delimiter=",")
    assert raw.shape == (1797, 65), raw.shape
    x = (raw[:, :64] / 16.0).astype(np.float32)
    y = raw[:, 64].astype(np.int64)
    perm = np.random.default_rng(SEED).permutation(len(y))
    n_test = 450
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


# ---------------------------------------------------------------------------------------------
# Models


class FMNISTMLP(nn.Module):
    """The paper's MNIST network at width 256: Dropout .2, 3 x [Linear, BN, ReLU, Dropout .5],
    Linear 10 + BN."""

    def __init__(self, width=256):
        super().__init__()
        self.drop0 = nn.Dropout(0.2)
        self.fc1, self.bn1, self.drop1 = nn.Linear(784, width), nn.BatchNorm1d(width), nn.Dropout(0.5)
        self.fc2, self.bn2, self.drop2 = nn.Linear(width, width), nn.BatchNorm1d(width), nn.Dropout(0.5)
        self.fc3, self.bn3, self.drop3 = nn.Linear(width, width), nn.BatchNorm1d(width), nn.Dropout(0.5)
        self.fc4, self.bn4 = nn.Linear(width, 10), nn.BatchNorm1d(10)

    def forward(self, x):
        x = self.drop0(x)
        x = self.drop1(F.relu(self.bn1(self.fc1(x))))
        x = self.drop2(F.relu(self.bn2(self.fc2(x))))
        x = self.drop3(F.relu(self.bn3(self.fc3(x))))
        return self.bn4(self.fc4(x))


class FMNISTCNN(nn.Module):
    """2 x [Conv 3x3, BN, ReLU, MaxPool 2], Flatten, Linear."""

    def __init__(self, c1=16, c2=32):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1)
        self.conv2, self.bn2 = nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(c2 * 7 * 7, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = self.pool(F.relu(self.bn2(self.conv2(x))))
        return self.fc(self.flatten(x))


class DownBlock(nn.Module):
    """Stride-2 residual block: Conv 3x3/2 + BN + HardSwish, depthwise 3x3 + BN + ReLU6,
    pointwise 1x1 + BN, added to a 1x1/2 Conv + BN shortcut, then ReLU6."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False)
        self.bn1, self.act1 = nn.BatchNorm2d(cout), nn.Hardswish()
        self.dw = nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False)
        self.bn2, self.act2 = nn.BatchNorm2d(cout), nn.ReLU6()
        self.pw, self.bn3 = nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.short = nn.Conv2d(cin, cout, 1, stride=2, bias=False)
        self.bns = nn.BatchNorm2d(cout)
        self.act = nn.ReLU6()

    def forward(self, x):
        y = self.act1(self.bn1(self.conv1(x)))
        y = self.act2(self.bn2(self.dw(y)))
        y = self.bn3(self.pw(y))
        return self.act(y + self.bns(self.short(x)))


class SameBlock(nn.Module):
    """Identity-shortcut residual block: depthwise 3x3 + BN + HardSwish, pointwise 1x1 (with bias)
    + BN, added to the input, then HardSwish."""

    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn1, self.act1 = nn.BatchNorm2d(c), nn.Hardswish()
        self.pw, self.bn2 = nn.Conv2d(c, c, 1), nn.BatchNorm2d(c)
        self.act = nn.Hardswish()

    def forward(self, x):
        y = self.act1(self.bn1(self.dw(x)))
        y = self.bn2(self.pw(y))
        return self.act(x + y)


class FMNISTResNet(nn.Module):
    """Stem Conv 3x3/2 + BN + ReLU6 (14x14), DownBlock 16->32 (7x7), SameBlock 32,
    DownBlock 32->64 (4x4), GlobalAveragePool, Flatten, Linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, stride=2, padding=1, bias=False)
        self.bn0, self.act0 = nn.BatchNorm2d(16), nn.ReLU6()
        self.block1 = DownBlock(16, 32)
        self.block2 = SameBlock(32)
        self.block3 = DownBlock(32, 64)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.act0(self.bn0(self.stem(x)))
        x = self.block3(self.block2(self.block1(x)))
        return self.fc(self.flatten(self.pool(x)))


class DigitsMLP(nn.Module):
    """64-64-10: Linear, BN, ReLU, Linear."""

    def __init__(self):
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(64, 64), nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.bn1(self.fc1(x))))


# ---------------------------------------------------------------------------------------------
# Training and evaluation


def train(model, x, y, epochs, batch, lr, seed, weight_decay=0.0):
    """Adam with a cosine learning-rate schedule and seeded shuffling; returns seconds taken."""
    torch.manual_seed(seed)  # Dropout draws from the global generator
    gen = torch.Generator().manual_seed(seed + 1)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    n = len(yt)
    steps_per_epoch = n // batch  # drop the ragged last batch so BatchNorm never sees a tiny one
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch)
    start = time.time()
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for i in range(steps_per_epoch):
            idx = perm[i * batch:(i + 1) * batch]
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item()
        print(f"  epoch {epoch + 1}/{epochs}: train loss {total / steps_per_epoch:.4f} "
              f"({time.time() - start:.0f} s)", flush=True)
    model.eval()
    return time.time() - start


@torch.no_grad()
def predict(model, x, batch=1000):
    """Eval-mode float32 logits."""
    model.eval()
    return torch.cat([model(torch.from_numpy(x[i:i + batch])) for i in range(0, len(x), batch)]).numpy()


def count_correct(logits, y):
    return int((logits.argmax(axis=1) == y).sum())


# ---------------------------------------------------------------------------------------------
# Export


def dropout_symbolic(g, input, p, train):
    """Keeps Dropout in the exported graph as an inference-mode node (ratio input, no
    training_mode), so the file carries the paper's architecture; PyTorch's own symbolic drops
    it in eval mode."""
    ratio = torch.onnx.symbolic_helper._maybe_get_const(p, "f")
    return g.op("Dropout", input, g.op("Constant", value_t=torch.tensor(ratio, dtype=torch.float32)))


def export(model, example, opset, doc, keep_dropout=False):
    """Exports an eval-mode model without fusing BatchNorm and returns the onnx.ModelProto.

    TrainingMode.PRESERVE on an eval-mode model skips the eval peephole pass that folds
    BatchNorm into Conv weights, and without constant folding parameters keep their names."""
    model.eval()
    path = os.path.join(HERE, ".export.tmp.onnx")
    if keep_dropout:
        torch.onnx.register_custom_op_symbolic("::dropout", dropout_symbolic, opset)
    # The exporter merges initializers with equal values into one tensor. In the residual blocks
    # the two BatchNorm biases before an Add always receive equal gradients and stay equal, and
    # merging them would make two BatchNorms share one bias under one name; keep them separate.
    dedup = torch._C._jit_pass_onnx_deduplicate_initializers
    torch._C._jit_pass_onnx_deduplicate_initializers = lambda graph, params, training: params
    try:
        torch.onnx.export(
            model, example, path,
            input_names=["input"], output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
            opset_version=opset,
            training=torch.onnx.TrainingMode.PRESERVE,
            do_constant_folding=False,
        )
    finally:
        torch._C._jit_pass_onnx_deduplicate_initializers = dedup
        if keep_dropout:
            torch.onnx.unregister_custom_op_symbolic("::dropout", opset)
    m = onnx.load(path)
    os.remove(path)
    m.doc_string = doc
    for key, value in (
        ("source", "qtool testmodels/make.py"),
        ("preprocessing", "pixel/255 in [0,1], no mean/std normalisation"
         if example.shape[-1] != 64 else "value/16 in [0,1]"),
    ):
        p = m.metadata_props.add()
        p.key, p.value = key, value
    return m


def initializers_to_constants(m):
    """Moves every initializer into a Constant node whose output has the initializer's name, as
    some converters write weights, and drops it from the graph inputs if listed there."""
    g = m.graph
    names = {t.name for t in g.initializer}
    consts = []
    for t in g.initializer:
        value = onnx.TensorProto()
        value.CopyFrom(t)
        consts.append(helper.make_node("Constant", [], [t.name], name=t.name + "/Constant", value=value))
    nodes = consts + list(g.node)
    del g.node[:]
    g.node.extend(nodes)
    inputs = [i for i in g.input if i.name not in names]
    del g.input[:]
    g.input.extend(inputs)
    del g.initializer[:]
    return m


def onnx_params(m):
    """Name -> numpy array of every initializer and every Constant node output."""
    out = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "Constant":
            out[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return out


def check_exported(name, m, model, path):
    """Asserts the conventions other packages rely on, then the ONNX checker."""
    g = m.graph
    assert [i.name for i in g.input] == ["input"], (name, [i.name for i in g.input])
    assert [o.name for o in g.output] == ["logits"], (name, [o.name for o in g.output])
    for vi in (g.input[0], g.output[0]):
        assert vi.type.tensor_type.shape.dim[0].dim_param == "batch", (name, vi)
    ops = [n.op_type for n in g.node]
    n_bn = sum(isinstance(mod, nn.modules.batchnorm._BatchNorm) for mod in model.modules())
    assert ops.count("BatchNormalization") == n_bn, (name, ops.count("BatchNormalization"), n_bn)
    assert not {"Transpose", "MatMul", "Identity", "Reshape", "Shape"} & set(ops), (name, ops)
    params = onnx_params(m)
    for key, value in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        assert key in params, (name, key, sorted(params))
        assert np.array_equal(params[key], value.numpy()), (name, key)
    for n in g.node:
        if n.op_type == "Gemm":
            attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            assert attrs.get("transB") == 1 and attrs.get("transA", 0) == 0, (name, n)
            assert n.input[1] in params and n.input[1].endswith(".weight"), (name, n.input)
        if n.op_type == "BatchNormalization":
            assert all(i in params for i in n.input[1:]), (name, n.input)
    onnx.checker.check_model(m, full_check=True)
    save_onnx(m, path)
    onnx.checker.check_model(path, full_check=True)
    size = os.path.getsize(path)
    assert size <= MAX_ONNX_BYTES, (name, size)
    return size


# ---------------------------------------------------------------------------------------------
# A float64 numpy evaluator of the exported graphs, written from the ONNX operator spec, so that
# each file is checked against the PyTorch logits without relying on PyTorch's exporter.


def _conv(x, w, b, attrs):
    group = attrs.get("group", 1)
    assert all(d == 1 for d in attrs.get("dilations", [1, 1]))
    kh, kw = w.shape[2:]
    sh, sw = attrs.get("strides", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    n, c, oh, ow = win.shape[:4]
    cg, mg = c // group, w.shape[0] // group
    outs = []
    for gi in range(group):
        cols = win[:, gi * cg:(gi + 1) * cg].transpose(0, 2, 3, 1, 4, 5).reshape(n, oh, ow, -1)
        wg = w[gi * mg:(gi + 1) * mg].reshape(mg, -1)
        outs.append(cols @ wg.T)
    y = np.concatenate(outs, axis=3).transpose(0, 3, 1, 2)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def _maxpool(x, attrs):
    kh, kw = attrs["kernel_shape"]
    sh, sw = attrs.get("strides", [1, 1])
    pt, pl, pb, pr = attrs.get("pads", [0, 0, 0, 0])
    assert not attrs.get("ceil_mode", 0)
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]
    return win.max(axis=(4, 5))


def run_onnx(m, x):
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    env[m.graph.input[0].name] = x.astype(np.float64)
    for n in m.graph.node:
        a = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        ins = [env[i] if i else None for i in n.input]
        op = n.op_type
        if op == "Constant":
            y = numpy_helper.to_array(a["value"]).astype(np.float64)
        elif op == "Gemm":
            A = ins[0].T if a.get("transA", 0) else ins[0]
            B = ins[1].T if a.get("transB", 0) else ins[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(ins) > 2 and ins[2] is not None:
                y = y + a.get("beta", 1.0) * ins[2]
        elif op == "BatchNormalization":
            x0, s, b, mean, var = ins
            shape = (1, -1) + (1,) * (x0.ndim - 2)
            eps = a.get("epsilon", 1e-5)
            y = (x0 - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * s.reshape(shape) + b.reshape(shape)
        elif op == "Relu":
            y = np.maximum(ins[0], 0)
        elif op in ("Dropout", "Identity"):
            y = ins[0]
        elif op == "Clip":
            lo = ins[1] if len(ins) > 1 and ins[1] is not None else a.get("min", -np.inf)
            hi = ins[2] if len(ins) > 2 and ins[2] is not None else a.get("max", np.inf)
            y = np.clip(ins[0], lo, hi)
        elif op == "HardSwish":
            y = ins[0] * np.clip(ins[0] / 6 + 0.5, 0, 1)
        elif op == "Add":
            y = ins[0] + ins[1]
        elif op == "Flatten":
            axis = a.get("axis", 1)
            y = ins[0].reshape(int(np.prod(ins[0].shape[:axis])), -1)
        elif op == "GlobalAveragePool":
            y = ins[0].mean(axis=tuple(range(2, ins[0].ndim)), keepdims=True)
        elif op == "MaxPool":
            y = _maxpool(ins[0], a)
        elif op == "Conv":
            y = _conv(ins[0], ins[1], ins[2] if len(ins) > 2 else None, a)
        else:
            raise NotImplementedError(f"reference evaluator: op {op}")
        env[n.output[0]] = y
    return env[m.graph.output[0].name]


def run_onnx_batched(m, x, batch=500):
    return np.concatenate([run_onnx(m, x[i:i + batch]) for i in range(0, len(x), batch)])


# ---------------------------------------------------------------------------------------------
# Fixtures


def grad_fixture(model, params, x, y):
    """Gradients of mean softmax cross-entropy on (x, y), float64 compute, float32 storage.

    Variant eval: BatchNorm on running statistics, Dropout off. Variant bntrain: BatchNorm on
    batch statistics, Dropout off. Keys are ONNX tensor names; each torch parameter's name is
    asserted to be the ONNX tensor holding the same values in the same shape."""
    out = {}
    xb = torch.from_numpy(x).double()
    yb = torch.from_numpy(y)
    for variant in ("eval", "bntrain"):
        m = copy.deepcopy(model).double()
        m.eval()
        if variant == "bntrain":
            for mod in m.modules():
                if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                    mod.train()
        named = list(m.named_parameters())
        loss = F.cross_entropy(m(xb), yb)
        grads = torch.autograd.grad(loss, [p for _, p in named])
        for (name, p), gr in zip(named, grads):
            assert name in params, (name, sorted(params))
            assert params[name].shape == tuple(p.shape), (name, params[name].shape, p.shape)
            assert np.array_equal(params[name].astype(np.float64), p.detach().numpy()), name
            out[f"{variant}/{name}"] = gr.numpy().astype(np.float32)
        out[f"loss_{variant}"] = np.array(loss.item(), dtype=np.float32)

        # Directional finite-difference check of the whole gradient, in float64. The step is small
        # so that few ReLU kinks are crossed; the tolerance is relative to sum |g_i d_i|, the
        # scale of the terms that cancel in the directional derivative.
        rng = np.random.default_rng(SEED)
        dirs = [torch.from_numpy(rng.standard_normal(tuple(p.shape))) for _, p in named]
        eps = 1e-7

        def loss_at(sign):
            mm = copy.deepcopy(m)
            with torch.no_grad():
                for (_, p), d in zip(mm.named_parameters(), dirs):
                    p.add_(sign * eps * d)
                return F.cross_entropy(mm(xb), yb).item()

        fd = (loss_at(1) - loss_at(-1)) / (2 * eps)
        an = sum(float((gr * d).sum()) for gr, d in zip(grads, dirs))
        scale = sum(float((gr * d).abs().sum()) for gr, d in zip(grads, dirs))
        assert abs(fd - an) <= 1e-6 * scale, (variant, fd, an, scale)
    return out


def savez(path, **arrays):
    """Writes a compressed .npz like numpy's savez_compressed, but with fixed member timestamps so
    that a rerun gives identical bytes, and atomically (temporary file, then rename)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w") as z:
        for key, value in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)
    os.replace(tmp, path)


def save_onnx(m, path):
    tmp = path + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------


ACCURACY_FIELDS = ("correct", "total", "accuracy", "subset_file", "subset_correct", "subset_total",
                   "subset_accuracy")

ARCH = {
    "fmnist-mlp": (
        "The paper's MNIST network at width 256: Dropout 0.2, then 3 x [Linear 256 (Gemm, transB=1), "
        "BatchNorm1d, ReLU, Dropout 0.5], then Linear 10 + BatchNorm1d. The Dropout nodes are kept "
        "in inference form (a `ratio` input from a Constant node, no `training_mode` input), so "
        "the graph carries the architecture and a trainer can switch them on; PyTorch's exporter "
        "would otherwise drop them."),
    "fmnist-cnn": (
        "2 x [Conv 3x3 pad 1 (with bias), BatchNorm2d, ReLU, MaxPool 2x2], then Flatten and "
        "Linear 1568 -> 10 (Gemm, transB=1). Channels 1 -> 16 -> 32."),
    "fmnist-resnet": (
        "Stem Conv 3x3 stride 2 (16 ch, 14x14) + BN + ReLU6; a stride-2 residual block 16 -> 32 "
        "(Conv 3x3/2 + BN + HardSwish, depthwise Conv 3x3 with group = 32 + BN + ReLU6, pointwise "
        "Conv 1x1 + BN, plus a 1x1/2 Conv + BN shortcut, Add, ReLU6; 7x7); an identity residual "
        "block at 32 channels (depthwise 3x3 + BN + HardSwish, pointwise 1x1 with bias + BN, Add "
        "with the input, HardSwish); a stride-2 residual block 32 -> 64 (as the first; 4x4); "
        "GlobalAveragePool, Flatten, Linear 64 -> 10 (Gemm). Convolutions before a BatchNorm have "
        "no bias, except the pointwise one in the identity block. ReLU6 exports as Clip with min "
        "and max inputs from Constant nodes. Opset 14 because HardSwish needs it."),
    "digits-mlp": (
        "Linear 64 -> 64 (Gemm, transB=1), BatchNorm1d, ReLU, Linear 64 -> 10 (Gemm). Written at "
        "opset 9 and IR version 4 (the versions of ONNX 1.4) with every weight, bias and "
        "BatchNorm tensor in a Constant node whose output carries the PyTorch name "
        "(`fc1.weight`, ...), and no initializers, as some converters write them."),
}

DATASET = {
    "fmnist": "Fashion-MNIST test set (t10k)",
    "digits": "the digits test split (digits-test.npz)",
}


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def pct(correct, total):
    return f"{100 * correct / total:.2f} % ({correct}/{total})"


def write_readme(results):
    lines = [
        "# testmodels",
        "",
        "Small full-precision ONNX models, data subsets and PyTorch fixtures that qtool's tests run",
        "against. Everything here was made by one run of [make.py](make.py), committed for provenance:",
        "",
        "    apt-get install -y python3-torch python3-onnx python3-sklearn dataset-fashion-mnist",
        "    /usr/bin/python3 testmodels/make.py",
        "",
        "It needs Debian's `/usr/bin/python3` (PyTorch 1.13, onnx 1.12), not a pyenv python3. All seeds",
        "are fixed; training runs on one CPU thread and took the times listed below. This file and",
        "accuracy.json are written by the script too.",
        "",
        "## Conventions",
        "",
        "- Image inputs are pixel/255 in [0, 1], float32, without mean/std normalisation. Digits inputs",
        "  are value/16 in [0, 1].",
        "- One input named `input`, one output named `logits` (raw scores, no softmax); the batch",
        "  dimension is symbolic, named `batch`.",
        "- BatchNormalization is never fused into the weights: every BatchNorm of the PyTorch model is a",
        "  BatchNormalization node whose scale, bias, mean and variance are separate tensors.",
        "- Parameter tensors keep their PyTorch names (`fc1.weight`, `bn1.running_mean`,",
        "  `block1.dw.weight`, ...). Linear layers are Gemm nodes with transB=1, so a Gemm weight has",
        "  PyTorch's [out, in] layout.",
        "- Every file passes `onnx.checker.check_model(..., full_check=True)`, and a float64 numpy",
        "  evaluator of the ONNX graph (in make.py, written from the operator spec) reproduces PyTorch's",
        "  logits within 1e-4 and the same full-test-set accuracy.",
        "- Accuracy is top-1 of the PyTorch source model in eval mode, in float32, on the full test set.",
        "",
        "## Models",
        "",
        "| file | input | opset (IR) | parameters | size | accuracy, full test set | accuracy, shipped subset |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        shape = "[batch, 784]" if name == "fmnist-mlp" else (
            "[batch, 64]" if name.startswith("digits") else "[batch, 1, 28, 28]")
        lines.append(
            f"| {name}.onnx | {shape} | {r['opset']} ({r['ir']}) | {r['params']:,} | "
            f"{r['bytes']:,} B | {pct(r['correct'], r['total'])} | "
            f"{pct(r['subset_correct'], r['subset_total'])} |")
    lines.append("")
    for name, r in results.items():
        ops = ", ".join(f"{op} x{n}" for op, n in sorted(r["ops"].items()))
        ds = DATASET[name.split("-")[0]]
        lines += [
            f"### {name}.onnx",
            "",
            ARCH[name],
            "",
            f"- Accuracy on {ds}: {pct(r['correct'], r['total'])}"
            + ("." if ds.endswith(f"({r['subset_file']})") else
               f"; on {r['subset_file']}: {pct(r['subset_correct'], r['subset_total'])}."),
            f"- Trainable parameters: {r['params']:,}; file size {r['bytes']:,} bytes; opset {r['opset']}, "
            f"IR version {r['ir']}; {r['initializers']} initializers.",
            f"- Nodes: {ops}.",
            f"- Training: Adam, learning rate {r['lr']:g} with cosine decay, weight decay {r['wd']:g}, "
            f"batch {r['batch']}, {r['epochs']} epochs ({r['train_seconds']} s wall time on one thread of "
            "the shared build machine).",
            "",
        ]
    lines += [
        "The fmnist models are trained on the 60 000 Fashion-MNIST training images; digits-mlp on the",
        "other 1 347 samples of the UCI digits (the 8x8 CSV that python3-sklearn ships), after a",
        "seeded permutation put 450 samples into the test split.",
        "",
        "## What the exported graphs contain",
        "",
        "- PyTorch 1.13 writes IR version 7 for opsets 13 and 14; digits-mlp is rewritten to IR 4.",
        "  Each file has value_info for its intermediate tensors, a doc_string, and metadata_props",
        "  `source` and `preprocessing`.",
        "- No Identity, Transpose, MatMul, Reshape or shape-computing nodes. Constant nodes appear in",
        "  fmnist-mlp (the four Dropout ratios, float32 scalars), fmnist-resnet (the min and max",
        "  scalars of each Clip) and digits-mlp (all weights).",
        "- BatchNormalization attributes: epsilon 1e-5 and momentum 0.9 (ONNX's momentum is the weight",
        "  of the old running value, 1 - PyTorch's 0.1); at opset 14 also training_mode = 0. The",
        "  running statistics are the ones PyTorch accumulated.",
        "- Dropout in fmnist-mlp has inputs (data, ratio) and one output; without a training_mode",
        "  input it is the identity at inference.",
        "- Conv nodes carry explicit kernel_shape, pads, strides, dilations and group; MaxPool",
        "  kernel_shape, pads and strides (ceil_mode 0).",
        "",
        "## Data subsets",
        "",
        f"- `fmnist-calib.npz`: `x` float32 [{CALIB_N}, 1, 28, 28], the first {CALIB_N} Fashion-MNIST test images",
        f"  /255; `y` int64 [{CALIB_N}]. For fmnist-mlp, flatten each image to 784 values (row-major).",
        "- `digits-test.npz`: `x` float32 [450, 64] (value/16), `y` int64 [450]: the whole digits test",
        "  split, on which digits-mlp's accuracy is measured.",
        "- `digits-test.csv`: the same split as CSV, a header row `f0,...,f63,label`, then 64 feature",
        "  columns (value/16, written exactly) and the integer label.",
        "",
        "The .npz files are compressed like numpy's savez_compressed (deflate, fixed member dates so",
        "reruns give identical bytes); inside the zip each key `k` is the member `k.npy`.",
        "",
        "## Fixtures (fixtures/)",
        "",
        "- `<model>-logits.npz`: key `logits`, float32 [n, 10], PyTorch eval-mode logits of exactly the",
        "  shipped samples, in order (the 1000 images of fmnist-calib.npz, or the 450 digits test samples).",
        f"- `<model>-grads.npz`: gradients of the mean softmax cross-entropy over the first {GRAD_BATCH} shipped",
        "  samples and their labels, computed in float64 (model.double()) and stored as float32 arrays",
        "  in the ONNX tensor's shape, keyed by the ONNX tensor name (initializer name, or for",
        "  digits-mlp the Constant node's output name). Only trainable tensors have gradients: weights,",
        "  biases and BatchNorm scale and bias, not running mean or variance. Two variants:",
        "  - `eval/<name>`: BatchNorm on its running statistics, Dropout off (the model in eval mode);",
        "  - `bntrain/<name>`: BatchNorm on the batch's statistics (biased variance, the epsilon of the",
        "    node), Dropout still off;",
        "  - `loss_eval` and `loss_bntrain`: the two losses, float32 scalars (shape ()).",
        "",
        "  make.py asserts that each PyTorch parameter is the ONNX tensor of that name (same shape,",
        "  same values) and checks each gradient against a central finite difference along a random",
        "  direction in float64.",
        "",
        "Gradient keys per model:",
        "",
    ]
    for name, r in results.items():
        names = [k.split("/", 1)[1] for k in r["grad_keys"] if k.startswith("eval/")]
        lines.append(f"- {name}: " + ", ".join(f"`{n}`" for n in names))
    lines += [
        "",
        "## accuracy.json",
        "",
        "For Go tests, so that they need not parse this file: per model `correct`, `total` and",
        "`accuracy` on the full test set, and `subset_file`, `subset_correct`, `subset_total` and",
        "`subset_accuracy` on the shipped subset.",
        "",
        "## Go package",
        "",
        "`package testmodels` (doc.go) embeds fmnist-mlp.onnx and fmnist-calib.npz as `FMNISTMLP` and",
        "`FMNISTCalib`, so that `qtool binarize` runs with no flags on a fresh machine.",
        "",
    ]
    tmp = os.path.join(HERE, "README.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, os.path.join(HERE, "README.md"))


def param_count(model):
    return sum(p.numel() for p in model.parameters())


def main():
    # One thread: on the shared 2-core machine two OpenMP threads spin against other jobs and
    # measured 3-8x slower per step than one.
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    os.makedirs(FIXTURES, exist_ok=True)
    t0 = time.time()

    xtr, ytr, xte, yte = load_fmnist()
    dxtr, dytr, dxte, dyte = load_digits()
    calib_x, calib_y = xte[:CALIB_N], yte[:CALIB_N]
    savez(os.path.join(HERE, "fmnist-calib.npz"), x=calib_x, y=calib_y)
    savez(os.path.join(HERE, "digits-test.npz"), x=dxte, y=dyte)
    with open(os.path.join(HERE, "digits-test.csv.tmp"), "w") as f:
        f.write(",".join([f"f{i}" for i in range(64)] + ["label"]) + "\n")
        for xi, yi in zip(dxte, dyte):
            # value/16 has at most four decimals, so %g writes it exactly
            f.write(",".join(f"{v:g}" for v in xi) + f",{yi}\n")
    os.replace(os.path.join(HERE, "digits-test.csv.tmp"), os.path.join(HERE, "digits-test.csv"))

    specs = [
        # flat: the model takes [batch, 784]; keep_dropout: export Dropout nodes; constants:
        # rewrite initializers as Constant nodes
        dict(name="fmnist-mlp", make=FMNISTMLP, opset=13, epochs=15, batch=512, lr=4e-3, wd=0.0,
             flat=True, keep_dropout=True, constants=False),
        dict(name="fmnist-cnn", make=FMNISTCNN, opset=13, epochs=5, batch=256, lr=3e-3, wd=0.0,
             flat=False, keep_dropout=False, constants=False),
        dict(name="fmnist-resnet", make=FMNISTResNet, opset=14, epochs=5, batch=256, lr=3e-3, wd=0.0,
             flat=False, keep_dropout=False, constants=False),
        dict(name="digits-mlp", make=DigitsMLP, opset=9, epochs=60, batch=64, lr=1e-2, wd=1e-4,
             flat=False, keep_dropout=False, constants=True),
    ]
    results = {}
    for i, s in enumerate(specs):
        name = s["name"]
        print(f"{name}:", flush=True)
        if name.startswith("digits"):
            x_tr, y_tr, x_te, y_te, x_sub, y_sub = dxtr, dytr, dxte, dyte, dxte, dyte
            subset_file = "digits-test.npz"
        else:
            x_tr, y_tr, x_te, y_te, x_sub, y_sub = xtr, ytr, xte, yte, calib_x, calib_y
            subset_file = "fmnist-calib.npz"
        if s["flat"]:
            x_tr, x_te, x_sub = (a.reshape(len(a), -1) for a in (x_tr, x_te, x_sub))

        torch.manual_seed(SEED + 100 * i)
        model = s["make"]()
        secs = train(model, x_tr, y_tr, s["epochs"], s["batch"], s["lr"], SEED + 100 * i + 1, s["wd"])
        test_logits = predict(model, x_te)
        sub_logits = predict(model, x_sub)
        correct, sub_correct = count_correct(test_logits, y_te), count_correct(sub_logits, y_sub)
        print(f"  test accuracy {correct}/{len(y_te)}, subset {sub_correct}/{len(y_sub)}", flush=True)

        doc = f"qtool test model {name}: " + " ".join(type(model).__doc__.split())
        m = export(model, torch.from_numpy(x_sub[:2]), s["opset"], doc, keep_dropout=s["keep_dropout"])
        if s["constants"]:
            before = run_onnx(m, x_sub)
            m = initializers_to_constants(m)
            m.ir_version = 4  # the IR version of ONNX 1.4, which introduced opset 9
            assert not m.graph.initializer
            assert np.array_equal(run_onnx(m, x_sub), before), "Constant rewrite changed the outputs"
        path = os.path.join(HERE, f"{name}.onnx")
        size = check_exported(name, m, model, path)

        # The exported file, evaluated by the numpy reference, agrees with PyTorch.
        ref_sub = run_onnx_batched(m, x_sub)
        err = np.abs(ref_sub - sub_logits) / (1 + np.abs(ref_sub))
        assert err.max() < 1e-4, (name, err.max())
        assert (ref_sub.argmax(1) == sub_logits.argmax(1)).all(), name
        ref_correct = count_correct(run_onnx_batched(m, x_te), y_te)
        print(f"  exported {size} bytes; numpy evaluation of the file: {ref_correct}/{len(y_te)}, "
              f"max rel. logit difference to PyTorch on the subset {err.max():.2e}", flush=True)
        assert ref_correct == correct, (name, ref_correct, correct)

        params = onnx_params(m)
        savez(os.path.join(FIXTURES, f"{name}-logits.npz"), logits=sub_logits.astype(np.float32))
        grads = grad_fixture(model, params, x_sub[:GRAD_BATCH], y_sub[:GRAD_BATCH])
        savez(os.path.join(FIXTURES, f"{name}-grads.npz"), **grads)

        ops = {}
        for n in m.graph.node:
            ops[n.op_type] = ops.get(n.op_type, 0) + 1
        results[name] = dict(
            correct=correct, total=len(y_te), accuracy=round(correct / len(y_te), 6),
            subset_file=subset_file, subset_correct=sub_correct, subset_total=len(y_sub),
            subset_accuracy=round(sub_correct / len(y_sub), 6),
            params=param_count(model), bytes=size, opset=s["opset"], ir=m.ir_version, ops=ops,
            train_seconds=round(secs), epochs=s["epochs"], batch=s["batch"], lr=s["lr"], wd=s["wd"],
            initializers=len(m.graph.initializer), grad_keys=sorted(k for k in grads if "/" in k),
            constants=[n.output[0] for n in m.graph.node if n.op_type == "Constant"],
        )

    write_json(os.path.join(HERE, "accuracy.json"),
               {k: {f: v[f] for f in ACCURACY_FIELDS} for k, v in results.items()})
    write_readme(results)
    print(f"total {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
