#!/usr/bin/python3
# make.py exports the real-model corpus: small but real exporter graphs (torchvision
# architectures, a TransformerEncoder, recurrent, control-flow, resize, multi-input, fixed-batch
# and channels-last models) with PyTorch 1.13's ONNX exporter, each with a deterministic input
# set, a held-out input set (on which the binarized file's fidelity is measured), and a
# manifest that the Go tests in this folder read.
#
# Nothing it writes is committed: ResNet-18 alone is 45 MB. The Go tests run it once into
# .cache/corpus/ under the module root when that folder is missing or was written by another
# version of this file (the manifest records this file's SHA-256).
#
#     apt-get install -y python3-torch python3-torchvision python3-onnx dataset-fashion-mnist
#     /usr/bin/python3 testmodels/corpus/make.py [OUTDIR]      # default OUTDIR: .cache/corpus
#
# It needs Debian's /usr/bin/python3 (PyTorch 1.13, torchvision 0.14, onnx 1.12). Weights are
# random with fixed seeds (BatchNorm statistics estimated on random inputs, so that deep nets
# keep sane activation scales), except the sigmoid head, which is trained for a few seconds on
# Fashion-MNIST so that its decisions mean something. One CPU thread; about a minute.
#
# The manifest (manifest.json) lists per model: file, inputs (name, shape with -1 for a free
# dimension), outputs, kind (classifier: [N, C] logits; sequence: per-position class scores
# along class_axis; features; sigmoid: [N, 1] probability), the ops of the graph (subgraphs
# included), the qtool features it uses, and "needs": the known engine defects that still
# affect it, each with the reason. The Go test asserts that exactly those show (a crash's
# signature, or a binarized file that computes differently in onnxruntime), so an entry is
# removed here when the defect is fixed; every other model is checked in full.

import hashlib
import json
import os
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FMNIST = "/usr/share/datasets/fashion-mnist"
SEED = 14
N_SAMPLES = 64  # samples per input set: enough for `binarize --limit 64`
N_HELDOUT = 64  # samples of the held-out set on which binarized fidelity is measured


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def calibrate_bn(model, make_input, batches=4):
    """Estimates BatchNorm running statistics on random inputs (cumulative average), so that
    a randomly initialised deep net does not blow up or vanish layer by layer."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(*make_input(32))
    model.eval()


# ---------------------------------------------------------------------------------------------
# Models that are not torchvision's


class TransformerCls(nn.Module):
    """nn.TransformerEncoder, 2 layers, d=64, 4 heads, over 16 tokens; mean-pooled into 10
    logits. With mask=True the key padding mask is computed from the input (a token whose
    features are all zero is padding), as a padded batch of sequences would arrive: Equal,
    and masked attention (Where)."""

    def __init__(self, mask):
        super().__init__()
        layer = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(64, 10)
        self.mask = mask

    def forward(self, x):
        if self.mask:
            pad = x.abs().sum(-1) == 0
            h = self.enc(x, src_key_padding_mask=pad)
            keep = (~pad).unsqueeze(-1).to(h.dtype)
            h = (h * keep).sum(1) / keep.sum(1)
        else:
            h = self.enc(x).mean(1)
        return self.fc(h)


class ViTBlock(nn.Module):
    """A ViT-style model: 4x4 patch embedding of a 16x16 image, a class token, learned position
    embeddings, one pre-norm block with hand-written attention that masks empty (all-zero)
    patches with masked_fill (Equal, Where), a GELU MLP, and a linear head on the class token."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.patch = nn.Conv2d(3, d, 4, stride=4)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        n = x.shape[0]
        p = self.patch(x).flatten(2).transpose(1, 2)  # [N, 16, d]
        empty = p.abs().sum(-1) == 0  # patches of an all-zero region
        t = torch.cat([self.cls.expand(n, -1, -1), p], 1) + self.pos
        keep = torch.cat([torch.zeros(n, 1, dtype=torch.bool), empty], 1)  # never mask the class token
        h = self.ln1(t)
        q, k, v = self.qkv(h).chunk(3, -1)
        d = q.shape[-1] // self.heads

        def split(z):
            return z.reshape(n, -1, self.heads, d).transpose(1, 2)

        q, k, v = split(q), split(k), split(v)
        s = q @ k.transpose(-1, -2) / d ** 0.5
        s = s.masked_fill(keep[:, None, None, :], -1e4)
        a = s.softmax(-1) @ v
        t = t + self.proj(a.transpose(1, 2).reshape(n, -1, self.heads * d))
        t = t + self.mlp(self.ln2(t))
        return self.head(self.ln(t[:, 0]))


class RNNCls(nn.Module):
    """A recurrent sequence classifier: [N, 20, 16] features, one LSTM or GRU layer of 32,
    the last time step into 5 logits."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(16, 32, batch_first=True)
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class CTC(nn.Module):
    """A CTC-style text recognizer on [N, 1, 32, 64] line images: two Conv+BN+ReLU+MaxPool
    stages, the height folded into channels (Transpose, Reshape) to a [N, 16, 256] sequence,
    then a bidirectional LSTM (lstm=True) or two Conv1d layers, a Linear to 12 classes and
    log_softmax: [N, T=16, C=12]."""

    def __init__(self, lstm):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.lstm = lstm
        if lstm:
            self.seq = nn.LSTM(256, 32, batch_first=True, bidirectional=True)
        else:
            self.seq = nn.Sequential(nn.Conv1d(256, 64, 3, padding=1), nn.ReLU(), nn.Conv1d(64, 64, 3, padding=1), nn.ReLU())
        self.fc = nn.Linear(64, 12)

    def forward(self, x):
        f = self.conv(x)  # [N, 32, 8, 16]
        n, c, h, w = f.shape
        s = f.permute(0, 3, 1, 2).reshape(n, w, c * h)  # [N, T, 256]
        if self.lstm:
            s, _ = self.seq(s)
        else:
            s = self.seq(s.transpose(1, 2)).transpose(1, 2)
        return F.log_softmax(self.fc(s), -1)


class UNet(nn.Module):
    """A small U-Net segmenter on [N, 3, 32, 32]: two down stages, bilinear upsampling with
    F.interpolate (Resize), skip concatenation, 3-class per-pixel logits [N, 3, 32, 32]."""

    def __init__(self):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        self.d1, self.d2, self.mid = block(3, 16), block(16, 32), block(32, 32)
        self.u2, self.u1 = block(64, 16), block(32, 16)
        self.out = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        a = self.d1(x)
        b = self.d2(F.max_pool2d(a, 2))
        m = self.mid(F.max_pool2d(b, 2))
        u = self.u2(torch.cat([F.interpolate(m, scale_factor=2.0, mode="bilinear", align_corners=False), b], 1))
        u = self.u1(torch.cat([F.interpolate(u, scale_factor=2.0, mode="bilinear", align_corners=False), a], 1))
        return self.out(u)


class IfModel(nn.Module):
    """An MLP on [N, 24] whose head is chosen by a data-dependent branch on the batch's mean
    activation. Exported through torch.jit.script, so the branch is an If node whose two
    subgraphs hold their own Gemm/MatMul on outer-scope weights."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 32)
        self.a = nn.Linear(32, 10)
        self.b = nn.Linear(32, 10)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        if bool(h.mean() > 0):
            return self.a(h)
        else:
            return self.b(torch.relu(h))


class WhileModel(nn.Module):
    """An MLP on [N, 24] that refines its hidden state with a shared layer while the batch's
    mean activation stays above a threshold, at most 6 times. Exported through
    torch.jit.script, so the `while` is a Loop whose condition is computed from the data (with
    an If in its body for the short-circuit `and`): the trip count is known only at run time."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 32)
        self.step = nn.Linear(32, 32)
        self.head = nn.Linear(32, 10)
        with torch.no_grad():
            self.step.bias.mul_(0.1)  # small, so that the activations decay

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        i = 0
        while bool(h.abs().mean() > 0.05) and i < 6:
            h = torch.tanh(self.step(h)) * 0.8
            i += 1
        return self.head(h)


class SigmoidHead(nn.Module):
    """A binary detector with one sigmoid output [N, 1]: 784 -> 64 (BatchNorm, ReLU) -> 1,
    trained on Fashion-MNIST to tell footwear (sandal, sneaker, ankle boot) from the rest."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 64)
        self.bn = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc2(F.relu(self.bn(self.fc1(x)))))


class FixedBatch(nn.Module):
    """A streaming-audio-style head exported for batch 1 only: [1, 16, 96] features, Conv1d +
    BN + ReLU twice, global average, 4 logits."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(16, 32, 5, padding=2), nn.BatchNorm1d(32), nn.ReLU(),
            nn.Conv1d(32, 32, 5, stride=2, padding=2), nn.BatchNorm1d(32), nn.ReLU(),
        )
        self.fc = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc(self.net(x).mean(-1))


class Stateful(nn.Module):
    """A voice-activity-style recurrent step with two inputs: features x [N, 40] and a state
    [2, N, 32] whose batch axis is the second; outputs a speech probability [N, 1] and the new
    state [2, N, 32]. Plain Linear/Tanh/Sigmoid so that only multi-input feeding is new."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(40, 32)
        self.rec = nn.Linear(32, 32, bias=False)
        self.rec2 = nn.Linear(32, 32, bias=False)
        self.mix = nn.Linear(32, 32)
        self.out = nn.Linear(32, 1)

    def forward(self, x, state):
        h1 = torch.tanh(self.inp(x) + self.rec(state[0]))
        h2 = torch.tanh(self.mix(h1) + self.rec2(state[1]))
        return torch.sigmoid(self.out(h2)), torch.stack([h1, h2])


class ChannelsLast(nn.Module):
    """A CNN whose input is NHWC [N, 32, 32, 3], as TF-converted models take it: Transpose to
    NCHW inside the graph, two Conv+BN+ReLU, global average, 10 logits."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10),
        )

    def forward(self, x):
        return self.net(x.permute(0, 3, 1, 2))


# ---------------------------------------------------------------------------------------------
# Data


def read_idx(path):
    import gzip
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def train_sigmoid_head(model):
    """Trains the sigmoid head for 2 epochs on 12 000 Fashion-MNIST training images; returns
    the first N_SAMPLES test images as its input set, the next N_HELDOUT as its held-out set,
    and the test accuracy."""
    x = read_idx(os.path.join(FMNIST, "train-images-idx3-ubyte.gz"))[:12000].reshape(-1, 784).astype(np.float32) / 255
    y = np.isin(read_idx(os.path.join(FMNIST, "train-labels-idx1-ubyte.gz"))[:12000], [5, 7, 9]).astype(np.float32)
    xt = read_idx(os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz"))[:2000].reshape(-1, 784).astype(np.float32) / 255
    yt = np.isin(read_idx(os.path.join(FMNIST, "t10k-labels-idx1-ubyte.gz"))[:2000], [5, 7, 9])
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    g = torch.Generator().manual_seed(SEED)
    model.train()
    for _ in range(2):
        perm = torch.randperm(len(x), generator=g)
        for i in range(0, len(x), 128):
            idx = perm[i:i + 128]
            p = model(torch.from_numpy(x[idx]))[:, 0]
            loss = F.binary_cross_entropy(p, torch.from_numpy(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        acc = float(((model(torch.from_numpy(xt))[:, 0] > 0.5).numpy() == yt).mean())
    return {"input": xt[:N_SAMPLES]}, {"input": xt[N_SAMPLES:N_SAMPLES + N_HELDOUT]}, acc


# ---------------------------------------------------------------------------------------------
# The corpus


def tv(fn, **kw):
    return lambda: fn(weights=None, **kw)


def image(c, h, w):
    return lambda n: (torch.rand(n, c, h, w),)


# Each entry: name, constructor, example-input maker (n -> tuple of tensors), input names,
# output names, opset, dynamic (batch axis per input/output, or None for a fixed-batch export),
# kind, class_axis, features the model exercises, and needs: {defect: reason} for the known
# engine defects that still affect it.
CORPUS = [
    dict(name="mobilenet_v2", make=tv(torchvision.models.mobilenet_v2, num_classes=10), inputs=image(3, 32, 32),
         kind="classifier", opset=13,
         needs={"binarized-mismatch": "ill-conditioned, not an engine bug: PyTorch folded every BatchNorm into its Conv, so the binarized weights are ±1 without a scale, the expand convs reach thousands and ReLU6 becomes a step that amplifies rounding about tenfold per block; a half-ulp float32 perturbation of the input moves the float64 logits by ~0.57 of their scale, so engine and onnxruntime (both float32) differ from each other and from float64 by ~0.57 (top-1 ~12/64) in any --format. TestCorpusBinarizedFloat64 (float64_test.go) checks the engine against a float64 evaluation of the file, layer by layer, as close as onnxruntime"}),
    dict(name="resnet18", make=tv(torchvision.models.resnet18, num_classes=10), inputs=image(3, 32, 32),
         kind="classifier", opset=13),
    dict(name="mobilenet_v3_small", make=tv(torchvision.models.mobilenet_v3_small, num_classes=10),
         inputs=image(3, 32, 32), kind="classifier", opset=14, features=["depthwise-5x5-small-map"]),
    dict(name="efficientnet_b0", make=tv(torchvision.models.efficientnet_b0, num_classes=10),
         inputs=image(3, 32, 32), kind="classifier", opset=13, features=["depthwise-5x5-small-map"]),
    dict(name="shufflenet_v2_x0_5", make=tv(torchvision.models.shufflenet_v2_x0_5, num_classes=10),
         inputs=image(3, 32, 32), kind="classifier", opset=13),
    dict(name="squeezenet1_1", make=tv(torchvision.models.squeezenet1_1, num_classes=10),
         inputs=image(3, 64, 64), kind="classifier", opset=13),
    dict(name="transformer", make=lambda: TransformerCls(False), inputs=lambda n: (torch.randn(n, 16, 64),),
         kind="classifier", opset=14),
    dict(name="transformer_masked", make=lambda: TransformerCls(True), inputs=lambda n: (padded_tokens(n),),
         kind="classifier", opset=14, features=["Equal", "Where"]),
    dict(name="vit_block", make=ViTBlock, inputs=lambda n: (masked_images(n),), kind="classifier", opset=14,
         features=["Equal", "Where"]),
    dict(name="lstm_cls", make=lambda: RNNCls(nn.LSTM), inputs=lambda n: (torch.randn(n, 20, 16),),
         kind="classifier", opset=14, features=["LSTM"]),
    dict(name="gru_cls", make=lambda: RNNCls(nn.GRU), inputs=lambda n: (torch.randn(n, 20, 16),),
         kind="classifier", opset=14, features=["GRU"]),
    dict(name="ctc_lstm", make=lambda: CTC(True), inputs=image(1, 32, 64), kind="sequence", class_axis=2, opset=14,
         features=["LSTM", "sequence-output"]),
    dict(name="ctc_conv", make=lambda: CTC(False), inputs=image(1, 32, 64), kind="sequence", class_axis=2, opset=14,
         features=["sequence-output"]),
    dict(name="unet", make=UNet, inputs=image(3, 32, 32), kind="sequence", class_axis=1, opset=13,
         features=["Resize", "sequence-output"]),
    dict(name="if_branch", make=lambda: torch.jit.script(IfModel()), inputs=lambda n: (torch.randn(n, 24),), kind="classifier", opset=13,
         features=["If"]),
    dict(name="while_loop", make=lambda: torch.jit.script(WhileModel()), inputs=lambda n: (torch.randn(n, 24),),
         kind="classifier", opset=13, features=["Loop", "run-time-loop"]),
    dict(name="sigmoid_head", make=SigmoidHead, inputs=lambda n: (torch.rand(n, 784),), kind="sigmoid", opset=13,
         features=["sigmoid-output"]),
    dict(name="fixed_batch1", make=FixedBatch, inputs=lambda n: (torch.randn(n, 16, 96),), kind="classifier",
         opset=13, fixed_batch=True),
    dict(name="two_input_state", make=Stateful, inputs=lambda n: (torch.randn(n, 40), torch.randn(2, n, 32) * 0.5),
         input_names=["x", "state"], output_names=["prob", "state_out"], batch_axes=[0, 1], out_batch_axes=[0, 1],
         kind="sigmoid", opset=13, features=["sigmoid-output"]),
    dict(name="channels_last", make=ChannelsLast, inputs=lambda n: (torch.rand(n, 32, 32, 3),), kind="classifier",
         opset=13, features=["channels-last"]),
]


def padded_tokens(n):
    """Token features [n, 16, 64] where sample i keeps its first 16 - (i % 8) tokens and the
    rest are padding (all zero); at least 9 tokens always remain."""
    x = torch.randn(n, 16, 64)
    for i in range(n):
        k = i % 8
        if k:
            x[i, 16 - k:] = 0
    return x


def masked_images(n):
    """Images [n, 3, 16, 16] in which odd samples have a blank (zero) 4x4 patch, whose token
    the ViT block masks."""
    x = torch.rand(n, 3, 16, 16)
    for i in range(1, n, 2):
        r, c = (i // 2) % 4, (i // 8) % 4
        x[i, :, 4 * r:4 * r + 4, 4 * c:4 * c + 4] = 0
    return x


def graph_ops(g, ops):
    for node in g.node:
        ops.add(node.op_type)
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                graph_ops(a.g, ops)
            for sg in a.graphs:
                graph_ops(sg, ops)
    return ops


def dims(vi):
    return [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]


def export(spec, out):
    name = spec["name"]
    torch.manual_seed(SEED)
    model = spec["make"]()
    make_input = spec["inputs"]
    in_names = spec.get("input_names", ["input"])
    out_names = spec.get("output_names", ["output"])
    extra = {}
    if name == "sigmoid_head":
        data, heldout, acc = train_sigmoid_head(model)
        extra["fmnist_footwear_accuracy"] = acc
        example = (torch.from_numpy(data["input"][:2]),)
    else:
        calibrate_bn(model, make_input)
        torch.manual_seed(SEED + 1)
        xs = make_input(N_SAMPLES)
        data = {k: v.numpy().astype(np.float32) for k, v in zip(in_names, xs)}
        # Other samples of the same distribution, never seen by binarize: its --eval-data.
        torch.manual_seed(SEED + 2)
        heldout = {k: v.numpy().astype(np.float32) for k, v in zip(in_names, make_input(N_HELDOUT))}
        example = tuple(x[:2] if ax == 0 else x[:, :2] for x, ax in zip(xs, spec.get("batch_axes", [0] * len(xs))))
    model.eval()
    if spec.get("fixed_batch"):
        dynamic = None
        example = tuple(x[:1] for x in example)
    else:
        dynamic = {}
        for nm, ax in zip(in_names, spec.get("batch_axes", [0] * len(in_names))):
            dynamic[nm] = {ax: "batch"}
        for nm, ax in zip(out_names, spec.get("out_batch_axes", [0] * len(out_names))):
            dynamic[nm] = {ax: "batch"}
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, example, path, input_names=in_names, output_names=out_names,
                      dynamic_axes=dynamic, opset_version=spec["opset"], do_constant_folding=True)
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    np.savez(os.path.join(out, name + ".npz"), **data)
    np.savez(os.path.join(out, name + "-heldout.npz"), **heldout)
    # PyTorch's outputs on the same samples, as a sanity reference for the exporter itself (the
    # Go test compares qtool's engine with onnxruntime, not with these).
    with torch.no_grad():
        if spec.get("fixed_batch"):
            ys = [model(*(torch.from_numpy(data[k][i:i + 1]) for k in in_names)) for i in range(N_SAMPLES)]
            ref = {out_names[0]: torch.cat(ys).numpy()}
        else:
            y = model(*(torch.from_numpy(data[k]) for k in in_names))
            y = y if isinstance(y, tuple) else (y,)
            ref = {k: v.numpy() for k, v in zip(out_names, y)}
    np.savez(os.path.join(out, name + "-torch.npz"), **ref)
    params = sum(p.numel() for p in model.parameters())
    init = {i.name for i in m.graph.initializer}
    entry = {
        "name": name,
        "file": name + ".onnx",
        "data": name + ".npz",
        "heldout": name + "-heldout.npz",
        "torch_outputs": name + "-torch.npz",
        "opset": spec["opset"],
        "params": int(params),
        "inputs": [{"name": i.name, "shape": dims(i)} for i in m.graph.input if i.name not in init],
        "outputs": [{"name": o.name, "shape": dims(o)} for o in m.graph.output],
        "kind": spec["kind"],
        "ops": sorted(graph_ops(m.graph, set())),
        "features": sorted(set(spec.get("features", [])) | set(spec.get("needs", {})) |
                           ({"fixed-batch"} if spec.get("fixed_batch") else set()) |
                           ({"multi-input"} if len(in_names) > 1 else set())),
        "needs": spec.get("needs", {}),
        "samples": N_SAMPLES,
        "heldout_samples": N_HELDOUT,
    }
    if "class_axis" in spec:
        entry["class_axis"] = spec["class_axis"]
    entry.update(extra)
    return entry


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".cache", "corpus")
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    entries = []
    for spec in CORPUS:
        if only and spec["name"] not in only:
            continue
        t0 = time.time()
        e = export(spec, out)
        e["export_seconds"] = round(time.time() - t0, 2)
        print(f"{e['name']}: {e['params']} params, ops {' '.join(e['ops'])} ({e['export_seconds']} s)", flush=True)
        entries.append(e)
    # The manifest is written last, so that its presence means the whole corpus is there.
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"script_sha256": script_hash(), "torch": torch.__version__, "torchvision": torchvision.__version__,
                   "onnx": onnx.__version__, "models": entries}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
