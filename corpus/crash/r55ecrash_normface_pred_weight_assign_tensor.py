"""NormFace-style digit classifier with 2-D features.

A small CNN maps 28x28 digits to a 2-D feature (so the class clusters can be plotted) and a
bias-free linear layer classifies them. As in NormFace / L2-softmax, the class weight vectors of
the classification layer are normalised to unit length; here that is done after every epoch.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


def make_digits(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.rand(10, 1, 28, 28, generator=torch.Generator().manual_seed(123)) > 0.7
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y].float() + 0.4 * torch.randn(n, 1, 28, 28, generator=g)
    return x, y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.feature = nn.Linear(7 * 7 * 64, 2)
        self.pred = nn.Linear(2, 10, bias=False)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        feat = self.feature(x.flatten(1))
        return feat, self.pred(feat)

    def normalize_weight(self):
        self.pred.weight = self.pred.weight / torch.norm(self.pred.weight, dim=1, keepdim=True)


def main():
    x_train, y_train = make_digits(1600, seed=1)
    x_test, y_test = make_digits(400, seed=2)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=200)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    for epoch in range(6):
        model.train()
        total, correct, loss_sum = 0, 0, 0.0
        for i, (data, target) in enumerate(train_loader):
            _, logits = model(data)
            loss = F.cross_entropy(logits, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(target)
            correct += (logits.argmax(1) == target).sum().item()
            total += len(target)
            if i % 5 == 0:
                print(f"epoch {epoch} iter {i:2d} loss {loss.item():.4f}")
        model.normalize_weight()

        model.eval()
        test_correct = 0
        with torch.no_grad():
            for data, target in test_loader:
                _, logits = model(data)
                test_correct += (logits.argmax(1) == target).sum().item()
        print(f"epoch {epoch}: train loss {loss_sum / total:.4f} train acc {correct / total:.3f} "
              f"test acc {test_correct / len(y_test):.3f}")


if __name__ == "__main__":
    main()
