#!/usr/bin/python3
"""Makes objective.npz, the PyTorch references of the objective's losses (loss_objective.go).

Run with Debian's PyTorch 1.13 from this folder:  /usr/bin/python3 make_objective_fixtures.py
The output is committed next to this script; TestObjectiveLossesMatchPyTorch compares with it.

Inputs are float32-representable values held in float64, so that the Go losses (float32
outputs) see the same numbers and the references are exact to float64. For each case
<name>_value is the loss and <name>_grad its gradient with respect to the student's output,
by autograd, from torch's own functions:
  kl_logits{T}  T² · kl_div(log_softmax(s/T, 1), softmax(t/T, 1), sum) / positions, s, t [2,3,4]
  kl_probs      kl_div(log s, p, sum) / positions, s, p softmaxes along axis 1 of [2,3,4]
  kl_logprobs2  as kl_logits2 on log-softmax outputs (the student's a LogSoftmax output)
  ce_seq        cross_entropy(s.permute(0,2,1), labels), s [2,5,3] logits, labels [2,5]
  nll_seq       nll_loss on log-softmax outputs, and nll_probs on log of softmax outputs
  bkl_sigmoid   binary_cross_entropy(q, p) − binary_cross_entropy(p, p), q, p in (0,1) [6,1]
  bkl_logit     binary_cross_entropy_with_logits(s, sigmoid(t)) minus the target's entropy
  bce_sigmoid   binary_cross_entropy(q, y), y in {0,1}
  bce_logit     binary_cross_entropy_with_logits(s, y)
  nmse          ((s − t)²).sum() / (t²).sum(), s, t [2,3,4]
"""
import numpy as np
import torch
import torch.nn.functional as F

rng = np.random.default_rng(14)


def f32(a):
    return np.asarray(a, dtype=np.float32).astype(np.float64)


out = {}


def run(name, x0, fn):
    x = torch.tensor(x0, requires_grad=True)
    loss = fn(x)
    loss.backward()
    out[name + "_value"] = np.array(loss.item())
    out[name + "_grad"] = x.grad.numpy().copy()


s3 = f32(rng.normal(0, 2, (2, 3, 4)))
t3 = f32(rng.normal(0, 2, (2, 3, 4)))
out["s3"], out["t3"] = s3, t3
P = 2 * 4
T3 = torch.tensor(t3)
for T in (1, 2):
    run("kl_logits%d" % T, s3, lambda x: T * T * F.kl_div(F.log_softmax(x / T, 1), F.softmax(T3 / T, 1), reduction="sum") / P)

ps = f32(F.softmax(torch.tensor(s3), 1).numpy())
pt = f32(F.softmax(torch.tensor(t3), 1).numpy())
out["ps"], out["pt"] = ps, pt
PT = torch.tensor(pt)
run("kl_probs", ps, lambda x: F.kl_div(torch.log(x), PT, reduction="sum") / P)

ls = f32(F.log_softmax(torch.tensor(s3), 1).numpy())
lt = f32(F.log_softmax(torch.tensor(t3), 1).numpy())
out["ls"], out["lt"] = ls, lt
LT = torch.tensor(lt)
run("kl_logprobs2", ls, lambda x: 4 * F.kl_div(F.log_softmax(x / 2, 1), F.softmax(LT / 2, 1), reduction="sum") / P)

seq = f32(rng.normal(0, 2, (2, 5, 3)))
labels = rng.integers(0, 3, (2, 5))
out["seq"], out["seq_labels"] = seq, labels.astype(np.int64)
Y = torch.tensor(labels)
run("ce_seq", seq, lambda x: F.cross_entropy(x.permute(0, 2, 1), Y))
seq_lp = f32(F.log_softmax(torch.tensor(seq), 2).numpy())
seq_p = f32(F.softmax(torch.tensor(seq), 2).numpy())
out["seq_lp"], out["seq_p"] = seq_lp, seq_p
run("nll_seq", seq_lp, lambda x: F.nll_loss(x.permute(0, 2, 1), Y))
run("nll_probs", seq_p, lambda x: F.nll_loss(torch.log(x).permute(0, 2, 1), Y))

q = f32(rng.uniform(0.02, 0.98, (6, 1)))
p = f32(rng.uniform(0.02, 0.98, (6, 1)))
zs = f32(rng.normal(0, 3, (6, 1)))
zt = f32(rng.normal(0, 3, (6, 1)))
yb = rng.integers(0, 2, (6, 1))
out.update(q=q, p=p, zs=zs, zt=zt, yb=yb.astype(np.int64))
Pp = torch.tensor(p)
run("bkl_sigmoid", q, lambda x: F.binary_cross_entropy(x, Pp) - F.binary_cross_entropy(Pp, Pp))
St = torch.sigmoid(torch.tensor(zt))
run("bkl_logit", zs, lambda x: F.binary_cross_entropy_with_logits(x, St) - F.binary_cross_entropy(St, St))
Yb = torch.tensor(yb, dtype=torch.float64)
run("bce_sigmoid", q, lambda x: F.binary_cross_entropy(x, Yb))
run("bce_logit", zs, lambda x: F.binary_cross_entropy_with_logits(x, Yb))

run("nmse", s3, lambda x: ((x - T3) ** 2).sum() / (T3 ** 2).sum())
np.savez("objective.npz", **out)
