"""MLP classifier with plain SGD at lr 1e-3 and no momentum: slow, but it learns.

Same shape as the PyTorch "Optimizing Model Parameters" tutorial: a 3-layer
NeuralNetwork, batch size 64, SGD(lr=1e-3), a train_loop that prints the loss
every 100 batches and a test_loop per epoch. The loss creeps down a little every
epoch; that is what this learning rate does, not a bug.
"""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

learning_rate = 1e-3
batch_size = 64
epochs = 4


class SyntheticPatterns(Dataset):
    """10 classes of 8x8 images: class prototypes plus pixel noise."""

    def __init__(self, n, seed):
        proto_gen = torch.Generator().manual_seed(0)
        prototypes = torch.randn(10, 8, 8, generator=proto_gen)
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.images = prototypes[self.labels] + 0.5 * torch.randn(n, 8, 8, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.images[idx], self.labels[idx]


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(8 * 8, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.ReLU(),
            nn.Linear(256, 10),
        )

    def forward(self, x):
        return self.linear_relu_stack(self.flatten(x))


def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)

        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        if batch % 25 == 0:
            loss, current = loss.item(), batch * batch_size + len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test_loop(dataloader, model, loss_fn):
    model.eval()
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \n Accuracy: {(100 * correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")


def main():
    torch.manual_seed(0)
    train_dataloader = DataLoader(SyntheticPatterns(6400, seed=1), batch_size=batch_size, shuffle=True)
    test_dataloader = DataLoader(SyntheticPatterns(1000, seed=2), batch_size=batch_size)

    model = NeuralNetwork()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

    for t in range(epochs):
        print(f"Epoch {t + 1}\n-------------------------------")
        train_loop(train_dataloader, model, loss_fn, optimizer)
        test_loop(test_dataloader, model, loss_fn)
    print("Done!")


if __name__ == "__main__":
    main()
