"""Prune a sensor-reading classifier with an L1 channel pruner, speed it up, then fine-tune.

The readings are 24 noisy sensor channels; the class (one of 5 machine states)
is a nonlinear function of a few of them. The pruner ranks the hidden units of
each layer by the L1 norm of their weights and the speed-up step rebuilds the
layers physically smaller, as a model-compression toolkit does.
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(7)

args = {
    'in_dim': 24,
    'hidden': 128,
    'n_class': 5,
    'sparsity': 0.5,
    'lr': 0.01,
    'batch_size': 64,
    'finetune_epochs': 6,
}


def make_readings(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, args['in_dim'], generator=g)
    proj = torch.randn(args['in_dim'], args['n_class'], generator=torch.Generator().manual_seed(123))
    logits = torch.tanh(x[:, :8]) @ proj[:8] + 0.5 * (x[:, 8:10] ** 2).sum(1, keepdim=True)
    y = logits.argmax(1)
    return x, y


class Net(nn.Module):
    def __init__(self, in_dim, hidden, n_class):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_class)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


class L1ChannelPruner:
    """Computes a keep-mask per layer from the L1 norm of each output unit's weights."""

    def __init__(self, model, config_list):
        self.model = model
        self.config_list = config_list

    def compress(self):
        masks = {}
        for cfg in self.config_list:
            for name in cfg['op_names']:
                layer = getattr(self.model, name)
                norms = layer.weight.detach().abs().sum(1)
                n_keep = int(round(layer.out_features * (1 - cfg['sparsity'])))
                keep = norms.argsort(descending=True)[:n_keep].sort().values
                masks[name] = keep
        return masks


class ModelSpeedup:
    """Replaces every pruned Linear (and the layer reading its output) with a smaller copy."""

    def __init__(self, model, masks):
        self.model = model
        self.masks = masks
        self.order = ['fc1', 'fc2', 'fc3']

    def speedup_model(self):
        in_keep = None
        for name in self.order:
            old = getattr(self.model, name)
            out_keep = self.masks.get(name, torch.arange(old.out_features))
            w = old.weight.detach()[out_keep]
            if in_keep is not None:
                w = w[:, in_keep]
            new = nn.Linear(w.shape[1], w.shape[0])
            new.weight.data.copy_(w)
            new.bias.data.copy_(old.bias.detach()[out_keep])
            setattr(self.model, name, new)
            in_keep = out_keep


def evaluate(model, loader, criterion):
    model.eval()
    total, correct, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for x, y in loader:
            out = model(x)
            loss_sum += criterion(out, y).item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    return loss_sum / total, correct / total


def main():
    x_train, y_train = make_readings(4000, seed=0)
    x_test, y_test = make_readings(1000, seed=1)
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=args['batch_size'], shuffle=True)
    test_loader = DataLoader(TensorDataset(x_test, y_test), batch_size=500)

    model = Net(args['in_dim'], args['hidden'], args['n_class'])
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args['lr'], momentum=0.9, weight_decay=5e-4)

    config_list = [{'sparsity': args['sparsity'], 'op_names': ['fc1', 'fc2']}]
    pruner = L1ChannelPruner(model, config_list)
    masks = pruner.compress()
    m_speedup = ModelSpeedup(model, masks)
    m_speedup.speedup_model()
    print(model)
    print('params after speedup:', sum(p.numel() for p in model.parameters()))

    print('start finetuning...')
    step = 0
    for epoch in range(args['finetune_epochs']):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                acc = (out.argmax(1) == y).float().mean().item()
                print(f'epoch {epoch} step {step:4d}  loss {loss.item():.4f}  acc {acc:.3f}')
            step += 1
        test_loss, test_acc = evaluate(model, test_loader, criterion)
        print(f'== epoch {epoch}: test loss {test_loss:.4f}  test acc {test_acc:.3f}')


if __name__ == '__main__':
    main()
