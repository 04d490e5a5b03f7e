"""Train a small MLP classifier on synthetic 10-class data, then calibrate it with temperature
scaling as in gpleiss/temperature_scaling (temperature_scaling.py): the trained network is wrapped in
ModelWithTemperature, the validation logits are collected once under no_grad, and a single
temperature parameter is fitted to the validation NLL with LBFGS(lr=0.01, max_iter=50)."""
import torch
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)

n_classes, n_features = 10, 20


def make_data(n, centers, gen):
    y = torch.randint(0, n_classes, (n,), generator=gen)
    x = centers[y] + 2.0 * torch.randn(n, n_features, generator=gen)
    return x, y


g = torch.Generator().manual_seed(1)
centers = 1.5 * torch.randn(n_classes, n_features, generator=g)
x_train, y_train = make_data(400, centers, g)
x_valid, y_valid = make_data(2000, centers, g)

train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=50, shuffle=True)
valid_loader = DataLoader(TensorDataset(x_valid, y_valid), batch_size=500, shuffle=False)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(n_features, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, n_classes)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class ModelWithTemperature(nn.Module):
    def __init__(self, model):
        super(ModelWithTemperature, self).__init__()
        self.model = model
        self.temperature = nn.Parameter(torch.ones(1) * 1.5)

    def forward(self, input):
        logits = self.model(input)
        return self.temperature_scale(logits)

    def temperature_scale(self, logits):
        temperature = self.temperature.unsqueeze(1).expand(logits.size(0), logits.size(1))
        return logits / temperature

    def set_temperature(self, valid_loader):
        nll_criterion = nn.CrossEntropyLoss()
        ece_criterion = _ECELoss()

        logits_list = []
        labels_list = []
        with torch.no_grad():
            for input, label in valid_loader:
                logits = self.model(input)
                logits_list.append(logits)
                labels_list.append(label)
            logits = torch.cat(logits_list)
            labels = torch.cat(labels_list)

        before_temperature_nll = nll_criterion(logits, labels).item()
        before_temperature_ece = ece_criterion(logits, labels).item()
        print('Before temperature - NLL: %.3f, ECE: %.3f' % (before_temperature_nll, before_temperature_ece))

        optimizer = optim.LBFGS([self.temperature], lr=0.01, max_iter=50)

        def eval():
            optimizer.zero_grad()
            loss = nll_criterion(self.temperature_scale(logits), labels)
            loss.backward()
            return loss
        optimizer.step(eval)

        after_temperature_nll = nll_criterion(self.temperature_scale(logits), labels).item()
        after_temperature_ece = ece_criterion(self.temperature_scale(logits), labels).item()
        print('Optimal temperature: %.3f' % self.temperature.item())
        print('After temperature - NLL: %.3f, ECE: %.3f' % (after_temperature_nll, after_temperature_ece))
        return self


class _ECELoss(nn.Module):
    def __init__(self, n_bins=15):
        super(_ECELoss, self).__init__()
        bin_boundaries = torch.linspace(0, 1, n_bins + 1)
        self.bin_lowers = bin_boundaries[:-1]
        self.bin_uppers = bin_boundaries[1:]

    def forward(self, logits, labels):
        softmaxes = F.softmax(logits, dim=1)
        confidences, predictions = torch.max(softmaxes, 1)
        accuracies = predictions.eq(labels)
        ece = torch.zeros(1, device=logits.device)
        for bin_lower, bin_upper in zip(self.bin_lowers, self.bin_uppers):
            in_bin = confidences.gt(bin_lower.item()) * confidences.le(bin_upper.item())
            prop_in_bin = in_bin.float().mean()
            if prop_in_bin.item() > 0:
                accuracy_in_bin = accuracies[in_bin].float().mean()
                avg_confidence_in_bin = confidences[in_bin].mean()
                ece += torch.abs(avg_confidence_in_bin - accuracy_in_bin) * prop_in_bin
        return ece


def evaluate(model):
    model.eval()
    correct, total_loss = 0, 0.0
    with torch.no_grad():
        for x, y in valid_loader:
            out = model(x)
            total_loss += F.cross_entropy(out, y, reduction='sum').item()
            correct += (out.argmax(1) == y).sum().item()
    return total_loss / len(valid_loader.dataset), correct / len(valid_loader.dataset)


model = Net()
optimizer = optim.Adam(model.parameters(), lr=1e-3)
loss, acc = evaluate(model)
print(f"epoch 0  valid loss {loss:.4f}  valid acc {acc:.3f}")
for epoch in range(1, 31):
    model.train()
    running = 0.0
    for x, y in train_loader:
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        running += loss.item() * x.size(0)
    if epoch % 5 == 0:
        vloss, vacc = evaluate(model)
        print(f"epoch {epoch}  train loss {running / len(train_loader.dataset):.4f}  "
              f"valid loss {vloss:.4f}  valid acc {vacc:.3f}")

model.eval()
scaled_model = ModelWithTemperature(model)
scaled_model.set_temperature(valid_loader)
loss, acc = evaluate(scaled_model)
print(f"calibrated  valid loss {loss:.4f}  valid acc {acc:.3f}")
