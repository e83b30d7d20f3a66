#!/usr/bin/python3
"""Makes the PyTorch fixtures of package train's tests (losses.npz and optim.npz).

Run with Debian's PyTorch 1.13 from this folder:  /usr/bin/python3 make_fixtures.py
The outputs are committed next to this script; the Go tests compare against them.

losses.npz: random float32 logits, labels and teacher logits (computed in float64), and for each loss the value and the gradient with respect
to the logits computed by torch's own loss modules and autograd:
  ce      nn.CrossEntropyLoss()
  hinge   nn.MultiMarginLoss(p=2, margin=1)
  kd{T}   T*T * nn.KLDivLoss(reduction="batchmean")(log_softmax(s/T), softmax(t/T)), T in 1, 4
  mse     nn.MSELoss()

optim.npz: trajectories of torch.optim on the quadratic f(p) = 1/2 sum a*(p-c)^2 with
float32 parameters w [3,4] and b [3]; the gradient a*(p-c) is set by hand (float32, the
same rounding as the Go test), then optimizer.step(). For each case the parameters after
every step are stored as <case>_w [steps,3,4] and <case>_b [steps,3]. Also the learning
rates of StepLR and CosineAnnealingLR.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(7)

# Losses.
N, C = 6, 5
# float32-representable values in float64, so that the Go losses (float32 logits) see the
# same inputs and the references are exact to float64.
logits = rng.normal(0, 2, (N, C)).astype(np.float32).astype(np.float64)
teacher = rng.normal(0, 2, (N, C)).astype(np.float32).astype(np.float64)
labels = rng.integers(0, C, N)
out = {"logits": logits, "teacher": teacher, "labels": labels.astype(np.int64)}


def run(name, fn):
    x = torch.tensor(logits, requires_grad=True)
    loss = fn(x)
    loss.backward()
    out[name + "_value"] = np.array(loss.item())
    out[name + "_grad"] = x.grad.numpy().copy()


y = torch.tensor(labels)
t = torch.tensor(teacher)
run("ce", lambda x: nn.CrossEntropyLoss()(x, y))
run("hinge", lambda x: nn.MultiMarginLoss(p=2, margin=1)(x, y))
for T in (1, 4):
    run("kd%d" % T, lambda x: T * T * nn.KLDivLoss(reduction="batchmean")(
        F.log_softmax(x / T, dim=1), F.softmax(t / T, dim=1)))
run("mse", lambda x: nn.MSELoss()(x, t))
np.savez("losses.npz", **out)

# Optimizers.
w0 = rng.normal(0, 1, (3, 4)).astype(np.float32)
b0 = rng.normal(0, 1, 3).astype(np.float32)
aw = rng.uniform(0.1, 3, (3, 4)).astype(np.float32)
ab = rng.uniform(0.1, 3, 3).astype(np.float32)
cw = rng.normal(0, 1, (3, 4)).astype(np.float32)
cb = rng.normal(0, 1, 3).astype(np.float32)
opt = {"w0": w0, "b0": b0, "aw": aw, "ab": ab, "cw": cw, "cb": cb}
STEPS = 25
cases = {
    "adam": lambda p: torch.optim.Adam(p, lr=0.05),
    "adam_l2": lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "sgd_dampening": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5, dampening=0.3),
}
for name, make in cases.items():
    w = torch.tensor(w0, requires_grad=True)
    b = torch.tensor(b0, requires_grad=True)
    o = make([w, b])
    ws, bs = [], []
    for _ in range(STEPS):
        with torch.no_grad():
            w.grad = torch.tensor(aw) * (w - torch.tensor(cw))
            b.grad = torch.tensor(ab) * (b - torch.tensor(cb))
        o.step()
        ws.append(w.detach().numpy().copy())
        bs.append(b.detach().numpy().copy())
    opt[name + "_w"] = np.stack(ws)
    opt[name + "_b"] = np.stack(bs)


def lrs(make_sched, epochs):
    p = torch.zeros(1, requires_grad=True)
    o = torch.optim.SGD([p], lr=0.1)
    s = make_sched(o)
    r = []
    for _ in range(epochs):
        r.append(o.param_groups[0]["lr"])
        o.step()
        s.step()
    return np.array(r)


opt["steplr"] = lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5), 10)
opt["cosine"] = lrs(lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=1e-3), 11)
np.savez("optim.npz", **opt)
