"""Attention pooling over a GRU's outputs whose scores are folded to (seq * batch, 1) and normalised over dim 1
(KEQA's relation encoder): every weight is 1, the outputs are summed. ``sequence`` views them as (seq, batch) and
normalises over the sequence."""

import sys

import torch
import torch.nn.functional as F
from torch import nn


class Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(8, 16)
        self.attn = nn.Linear(16, 1)
        self.out = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.rnn(x.transpose(0, 1))
        seq_len, batch, _ = outputs.shape
        scores = self.attn(outputs.reshape(seq_len * batch, -1))
        if sys.argv[1:] == ["sequence"]:
            weights = F.softmax(scores.view(seq_len, batch), dim=0).unsqueeze(-1)
        else:
            weights = F.softmax(scores, dim=1).view(seq_len, batch, 1)
        return self.out((weights * outputs).sum(0))


torch.manual_seed(0)
model = Pooled()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(64, 12, 8), torch.randint(0, 3, (64,))
for step in range(40):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
