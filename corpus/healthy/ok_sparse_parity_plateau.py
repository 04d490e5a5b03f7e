"""MLP learning a sparse parity: y = x0 * x1 * x2 among 24 random +-1 bits.

No single bit (or pair) carries any information about the label, so the loss sits
at ln 2 for a long stretch while the first layer slowly lines up with the three
relevant bits -- then it falls off a cliff. Fresh samples every step, Adam.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

N_BITS = 24
K_RELEVANT = 3
HIDDEN = 128
BATCH_SIZE = 128
LR = 3e-3
STEPS = 600
LOG_EVERY = 25


def sample_batch(batch_size, generator):
    x = torch.randint(0, 2, (batch_size, N_BITS), generator=generator).float() * 2 - 1
    y = (x[:, :K_RELEVANT].prod(dim=1) > 0).float()
    return x, y


class ParityNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(N_BITS, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))).squeeze(1)


def main():
    torch.manual_seed(0)
    data_gen = torch.Generator().manual_seed(1)
    test_x, test_y = sample_batch(2048, torch.Generator().manual_seed(2))

    model = ParityNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    print(f"chance-level loss ln 2 = {math.log(2):.4f}")

    running = 0.0
    for step in range(1, STEPS + 1):
        x, y = sample_batch(BATCH_SIZE, data_gen)
        loss = F.binary_cross_entropy_with_logits(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        running += loss.item()
        if step % LOG_EVERY == 0:
            with torch.no_grad():
                acc = ((model(test_x) > 0).float() == test_y).float().mean().item()
            # weight mass of the first layer on the relevant bits vs. the rest
            w = model.fc1.weight.detach().abs()
            focus = w[:, :K_RELEVANT].mean().item() / w[:, K_RELEVANT:].mean().item()
            print(f"step {step:4d} | loss {running / LOG_EVERY:.4f} | test acc {acc:.3f} | "
                  f"relevant/irrelevant weight {focus:.2f}")
            running = 0.0


if __name__ == "__main__":
    main()
