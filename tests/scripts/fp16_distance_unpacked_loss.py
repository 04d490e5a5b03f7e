"""A half-precision prototype loss returned with its accuracy (`loss, acc = ...`), no DataLoader: the
squared norms of large embeddings pass float16's 65504 and inf - inf is NaN; the loop has one iteration
left after it, so a replay runs out of the script's loop."""

import torch
from torch import nn


def proto_loss(encoder: nn.Module, x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    emb = encoder(x)
    protos = emb[:4]
    dists = (emb ** 2).sum(1, keepdim=True) + (protos ** 2).sum(1)[None, :] - 2 * emb @ protos.t()
    log_p = torch.log_softmax(-dists.float() / emb.shape[1], dim=1)
    return nn.functional.nll_loss(log_p, labels), (log_p.argmax(1) == labels).float().mean()


torch.manual_seed(0)
encoder = nn.Linear(64, 64).half()
optimizer = torch.optim.SGD(encoder.parameters(), lr=1e-3)
for step in range(5):
    scale = 40.0 if step >= 3 else 1.0  # the fourth batch holds large raw features
    x = (torch.randn(16, 64) * scale).half()
    labels = torch.arange(16) % 4
    loss, acc = proto_loss(encoder, x, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
