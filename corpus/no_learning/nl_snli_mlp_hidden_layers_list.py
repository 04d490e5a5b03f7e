"""SNLI-style entailment classifier on precomputed sentence encodings.

Each example is a (premise, hypothesis) pair of sentence vectors; the MLP sees
their concatenation and predicts entailment / neutral / contradiction.
The depth and the activation come from the options dict.
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1234)

options = {
    "dim_sent": 16,
    "n_layers": 2,
    "n_hid": 64,
    "act": "ReLU",
    "lr": 1e-3,
    "batch_size": 32,
    "n_epochs": 3,
    "disp_freq": 50,
}

LABELS = ["entailment", "neutral", "contradiction"]


def build_pairs(n, dim, noise=0.3):
    """premise p; hypothesis ~ p (entailment), unrelated (neutral), ~ -p (contradiction)."""
    p = F.normalize(torch.randn(n, dim), dim=1)
    y = torch.randint(0, 3, (n,))
    unrelated = F.normalize(torch.randn(n, dim), dim=1)
    h = torch.where((y == 0)[:, None], p, torch.where((y == 2)[:, None], -p, unrelated))
    h = h + noise * torch.randn(n, dim) / dim ** 0.5
    return torch.cat([p, h], dim=1), y


class SNLINet(nn.Module):
    def __init__(self, options):
        super(SNLINet, self).__init__()
        indim = 2 * options["dim_sent"]
        self.hids = []
        for li in range(options["n_layers"]):
            self.hids.append([
                nn.Linear(indim, options["n_hid"]),
                eval("nn.{}".format(options["act"]))(),
            ])
            indim = options["n_hid"]

        self.classifier = nn.Linear(options["n_hid"], 3)

    def forward(self, x):
        for linear, act in self.hids:
            x = act(linear(x))
        return self.classifier(x)


def accuracy(model, X, y):
    with torch.no_grad():
        return (model(X).argmax(dim=1) == y).float().mean().item()


def main():
    train_X, train_y = build_pairs(3200, options["dim_sent"])
    valid_X, valid_y = build_pairs(800, options["dim_sent"])

    model = SNLINet(options)
    optimizer = torch.optim.Adam(model.parameters(), lr=options["lr"])
    print(model)

    n_train = train_X.size(0)
    bs = options["batch_size"]
    uidx = 0
    start = time.time()
    for eidx in range(options["n_epochs"]):
        perm = torch.randperm(n_train)
        for i in range(0, n_train, bs):
            idx = perm[i:i + bs]
            x, y = train_X[idx], train_y[idx]

            optimizer.zero_grad()
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            optimizer.step()
            uidx += 1

            if uidx % options["disp_freq"] == 0:
                print("Epoch {} Update {} Cost {:.4f} ({:.1f}s)".format(eidx, uidx, loss.item(), time.time() - start))

        print("Epoch {} valid acc {:.3f}".format(eidx, accuracy(model, valid_X, valid_y)))


if __name__ == "__main__":
    main()
