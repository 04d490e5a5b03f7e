"""MAP baseline of a Bayesian-deep-learning benchmark on a CIFAR-style task (generated 3x16x16
images, 10 classes): train, checkpoint, then reload the checkpoint and continue training."""
import glob
import os
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


class BayesianOptimizer(torch.optim.Optimizer):
    def __init__(self, params, defaults):
        super().__init__(params, defaults)

    def step(self, forward_closure, backward_closure, grad_scaler=None):
        raise NotImplementedError()

    def complete_epoch(self):
        pass


class MAPOptimizer(BayesianOptimizer):
    '''
        Maximum A Posteriori

        This simply optimizes a point estimate of the parameters with the given base_optimizer.
    '''

    def __init__(self, params, base_optimizer):
        super().__init__(params, {})
        self.state["__base_optimizer"] = base_optimizer

    def step(self, forward_closure, backward_closure, grad_scaler=None):
        self.zero_grad()

        loss = forward_closure()
        backward_closure(loss)

        if grad_scaler is not None:
            grad_scaler.step(self.get_base_optimizer())
        else:
            self.get_base_optimizer().step()

        return loss

    def get_base_optimizer(self):
        return self.state["__base_optimizer"]


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 4 * 4, 128)
        self.fc2 = nn.Linear(128, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randn(10, 3, 16, 16, generator=torch.Generator().manual_seed(123))
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y] + 1.5 * torch.randn(n, 3, 16, 16, generator=g)
    return x, y


def build(config):
    model = ConvNet()
    base_optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    optimizer = MAPOptimizer(model.parameters(), base_optimizer)
    return model, optimizer


def run_epoch(model, optimizer, loader):
    model.train()
    total = 0.0
    for x, y in loader:
        def forward_closure():
            return F.cross_entropy(model(x), y)

        def backward_closure(loss):
            loss.backward()

        total += optimizer.step(forward_closure, backward_closure).item()
    optimizer.complete_epoch()
    return total / len(loader)


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    correct, loss, n = 0, 0.0, 0
    for x, y in loader:
        out = model(x)
        loss += F.cross_entropy(out, y, reduction="sum").item()
        correct += (out.argmax(1) == y).sum().item()
        n += y.numel()
    return loss / n, correct / n


def load_model(model_idx, model, optimizer, out_path, config):
    start_epoch = 0
    if config.get("use_checkpoint", None):
        ckpt_paths = glob.glob(out_path + f"{config['model']}_chkpt_{model_idx}_*.pth")
        ckpt_paths.sort(key=os.path.getmtime)
        ckpt = torch.load(ckpt_paths[-1], weights_only=False)
        model.load_state_dict(ckpt["model_state_dict"])
        optimizer.load_state_dict(ckpt["optimizer_state_dict"])
        start_epoch = ckpt["epoch"] + 1
        print(f"Resumed from {os.path.basename(ckpt_paths[-1])} at epoch {start_epoch}")
    return start_epoch


def train(config, out_path, train_loader, test_loader, first_epoch, last_epoch):
    model, optimizer = build(config)
    start_epoch = load_model(0, model, optimizer, out_path, config)
    start_epoch = max(start_epoch, first_epoch)
    for epoch in range(start_epoch, last_epoch):
        train_loss = run_epoch(model, optimizer, train_loader)
        test_loss, test_acc = evaluate(model, test_loader)
        print(f"Epoch {epoch}: train loss {train_loss:.4f}  test loss {test_loss:.4f}  test acc {test_acc:.3f}")
        torch.save({"epoch": epoch,
                    "model_state_dict": model.state_dict(),
                    "optimizer_state_dict": optimizer.state_dict()},
                   out_path + f"{config['model']}_chkpt_0_{epoch}.pth")


if __name__ == "__main__":
    config = {"model": "map", "lr": 5e-4, "use_checkpoint": False}
    xtr, ytr = make_data(1920, seed=1)
    xte, yte = make_data(1000, seed=2)
    train_loader = DataLoader(TensorDataset(xtr, ytr), batch_size=64, shuffle=True)
    test_loader = DataLoader(TensorDataset(xte, yte), batch_size=500)
    with tempfile.TemporaryDirectory() as tmp:
        out_path = tmp + "/"
        print("== initial run ==")
        train(config, out_path, train_loader, test_loader, 0, 1)
        print("== continue from checkpoint ==")
        config["use_checkpoint"] = True
        train(config, out_path, train_loader, test_loader, 0, 6)
