"""Small exporter models for qtool's input feeding (issue 14), made with Debian's
/usr/bin/python3 (torch 1.13, onnx 1.12): python3 make.py in this folder.

vad.onnx    audio [N,32] + recurrent state [2,N,8] + int64 scalar sr -> logits [N,2], state [2,N,8]
            (built from Linear/Tanh/Mul/Add, ops the engine has without LSTM/GRU)
fixed1.onnx static batch [1,4,12] (exported without dynamic_axes), Conv1d+BatchNorm -> [1,3]
nhwc.onnx   channels-last [N,8,6,1], transposed inside -> [N,3]
Each has a .npz of inputs named after the model's inputs."""
import numpy as np
import torch
from torch import nn

torch.manual_seed(14)
rng = np.random.default_rng(14)


class VAD(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(32, 8)
        self.rec = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, audio, state, sr):
        # The sample rate scales the audio, as a real front-end's framing would depend on it.
        x = audio * (sr.to(torch.float32) / 16000.0)
        h = torch.tanh(self.inp(x) + self.rec(state[0]))
        g = torch.sigmoid(self.gate(state[1]))
        h2 = g * h + (1 - g) * state[1]
        return self.out(h2), torch.stack([h, h2])


class Fixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 6, 3, padding=1)
        self.bn = nn.BatchNorm1d(6)
        self.fc = nn.Linear(6 * 12, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).reshape(1, -1))


class NHWC(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 6, 3)

    def forward(self, x):
        y = torch.relu(self.conv(x.permute(0, 3, 1, 2)))
        return self.fc(y.flatten(1))


def export(m, args, path, names, outs, dyn=None):
    m.eval()
    torch.onnx.export(m, args, path, input_names=names, output_names=outs,
                      dynamic_axes=dyn, opset_version=13)


vad = VAD()
export(vad, (torch.zeros(2, 32), torch.zeros(2, 2, 8), torch.tensor(16000)), "vad.onnx",
       ["input", "state", "sr"], ["logits", "stateN"],
       {"input": {0: "N"}, "state": {1: "N"}, "logits": {0: "N"}, "stateN": {1: "N"}})
np.savez("vad.npz", input=rng.standard_normal((40, 32)).astype(np.float32),
         state=(0.5 * rng.standard_normal((2, 40, 8))).astype(np.float32), sr=np.array(16000, np.int64))

fixed = Fixed()
with torch.no_grad():  # running statistics that are not the identity
    fixed.bn.running_mean.uniform_(-0.5, 0.5)
    fixed.bn.running_var.uniform_(0.5, 2)
fixed.eval()
torch.onnx.export(fixed, (torch.zeros(1, 4, 12),), "fixed1.onnx", input_names=["x"], output_names=["logits"],
                  opset_version=13, training=torch.onnx.TrainingMode.PRESERVE)  # keeps BatchNormalization
np.savez("fixed1.npz", x=rng.standard_normal((40, 4, 12)).astype(np.float32))

nhwc = NHWC()
export(nhwc, (torch.zeros(2, 8, 6, 1),), "nhwc.onnx", ["x"], ["logits"],
       {"x": {0: "N"}, "logits": {0: "N"}})
np.savez("nhwc.npz", x=rng.standard_normal((40, 8, 6, 1)).astype(np.float32))
