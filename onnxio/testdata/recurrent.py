#!/usr/bin/python3
# recurrent.py writes recurrent.onnx, PyTorch's (torch 1.13) export of an nn.LSTM, an
# nn.GRU and an nn.RNN (bidirectional, batch_first), for onnxio's
# TestChannelAxisRecurrentPyTorch. Run once from this folder:
#     /usr/bin/python3 recurrent.py
#
# A recurrent weight's "output channel" is a row: one gate of one hidden unit. Every
# element of PyTorch's weight_ih/weight_hh row r of direction d holds 1 + r + 1000·d, so
# the exporter's gate reordering and direction stacking can move rows but never mix them:
# the test checks that the schema's axis is the one along which each slice is one row.
# The model is deterministic and passes onnx.checker. It is kept apart from layers.py so
# that layers.onnx and its generated names stay as they are.
import io
import os

import onnx
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(20260114)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(3, 2, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(3, 5, batch_first=True, bidirectional=True)

    def forward(self, x):
        return self.lstm(x)[0], self.gru(x)[0], self.rnn(x)[0]


model = Recurrent().eval()
with torch.no_grad():
    for rnn in (model.lstm, model.gru, model.rnn):
        for d, sfx in enumerate(("", "_reverse")):
            for kind in ("weight_ih_l0", "weight_hh_l0"):
                w = getattr(rnn, kind + sfx)
                w.copy_((torch.arange(w.shape[0], dtype=torch.float32) + 1 + 1000 * d)[:, None].expand_as(w))
buf = io.BytesIO()
torch.onnx.export(model, torch.rand(2, 5, 3), buf, opset_version=14, input_names=["x"],
                  output_names=["lstm", "gru", "rnn"])
m = onnx.load_from_string(buf.getvalue())
m.doc_string = "written by onnxio/testdata/recurrent.py: W and R rows hold 1 + row + 1000·direction"
onnx.checker.check_model(m)
onnx.save(m, os.path.join(HERE, "recurrent.onnx"))
