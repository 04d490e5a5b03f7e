"""4-bit weight quantization-aware training of an MLP on 8x8 digit-like images.

Each QuantLinear keeps float weights and quantizes them (symmetric, per-tensor scale) before
the forward pass, so the trained network can be exported with 4-bit weights (8-bit biases).  The images
are generated here: every class is a fixed stroke pattern plus pixel noise and a random shift.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

NUM_CLASSES = 10
W_BITS = 4


def make_digits(n, generator):
    templates = (torch.rand(NUM_CLASSES, 8, 8, generator=torch.Generator().manual_seed(11)) > 0.6).float()
    labels = torch.randint(0, NUM_CLASSES, (n,), generator=generator)
    images = templates[labels]
    shifts = torch.randint(-1, 2, (n,), generator=generator)
    images = torch.stack([torch.roll(img, int(s), dims=1) for img, s in zip(images, shifts)])
    images = images + 0.3 * torch.randn(n, 8, 8, generator=generator)
    return images.view(n, 1, 8, 8), labels


def quantize_weight(w, bits):
    qmax = 2 ** (bits - 1) - 1
    scale = w.detach().abs().max() / qmax
    return torch.round(w / scale).clamp(-qmax - 1, qmax) * scale


class QuantLinear(nn.Linear):
    def __init__(self, in_features, out_features, bits=W_BITS):
        super().__init__(in_features, out_features)
        self.bits = bits

    def forward(self, x):
        w_q = quantize_weight(self.weight, self.bits)
        b_q = quantize_weight(self.bias, 8)
        return F.linear(x, w_q, b_q)


class QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = QuantLinear(64, 128)
        self.fc2 = QuantLinear(128, 64)
        self.fc3 = QuantLinear(64, NUM_CLASSES)

    def forward(self, x):
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main():
    g = torch.Generator().manual_seed(1)
    x_train, y_train = make_digits(6400, g)
    x_test, y_test = make_digits(1000, g)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=128, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=500)

    model = QuantMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(4):
        model.train()
        total, n = 0.0, 0
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in test_loader:
                correct += (model(images).argmax(1) == labels).sum().item()
        print(f"epoch {epoch + 1}  train loss {total / n:.4f}  test acc {correct / len(y_test):.3f}")


if __name__ == "__main__":
    main()
