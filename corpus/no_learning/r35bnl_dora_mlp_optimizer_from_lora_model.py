# LoRA vs. DoRA fine-tuning of a pretrained MLP (script version of a "DoRA from scratch"
# notebook). The MLP is pretrained on a source labelling of the data, then both adapter
# variants are fine-tuned on the target labelling with the base Linear layers frozen.
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(123)

##########################
### SETTINGS / DATA
##########################
DEVICE = torch.device("cpu")
BATCH_SIZE = 64

num_features = 64
num_hidden_1 = 128
num_hidden_2 = 256
num_classes = 10
learning_rate = 0.005
num_epochs = 2


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(num_classes, num_features, generator=torch.Generator().manual_seed(7)) * 0.45
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, num_features, generator=g)
    return x, y


x_train, y_train = make_data(6400, seed=1)
x_test, y_test = make_data(2000, seed=2)

# source task: original labels; target task: the classes are relabelled
remap = torch.tensor([3, 7, 0, 9, 1, 5, 8, 2, 6, 4])
source_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)
target_loader = DataLoader(TensorDataset(x_train, remap[y_train]), batch_size=BATCH_SIZE, shuffle=True)
target_test_loader = DataLoader(TensorDataset(x_test, remap[y_test]), batch_size=256)


##########################
### MODEL
##########################
class MultilayerPerceptron(nn.Module):
    def __init__(self, num_features, num_hidden_1, num_hidden_2, num_classes):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(num_features, num_hidden_1),
            nn.ReLU(),
            nn.Linear(num_hidden_1, num_hidden_2),
            nn.ReLU(),
            nn.Linear(num_hidden_2, num_classes),
        )

    def forward(self, x):
        return self.layers(x)


class LoRALayer(nn.Module):
    def __init__(self, in_dim, out_dim, rank, alpha):
        super().__init__()
        std_dev = 1 / torch.sqrt(torch.tensor(rank).float())
        self.A = nn.Parameter(torch.randn(in_dim, rank) * std_dev)
        self.B = nn.Parameter(torch.zeros(rank, out_dim))
        self.alpha = alpha

    def forward(self, x):
        return self.alpha * (x @ self.A @ self.B)


class LinearWithLoRAMerged(nn.Module):
    def __init__(self, linear, rank, alpha):
        super().__init__()
        self.linear = linear
        self.lora = LoRALayer(linear.in_features, linear.out_features, rank, alpha)

    def forward(self, x):
        lora = self.lora.A @ self.lora.B
        combined_weight = self.linear.weight + self.lora.alpha * lora.T
        return F.linear(x, combined_weight, self.linear.bias)


class LinearWithDoRAMerged(nn.Module):
    def __init__(self, linear, rank, alpha):
        super().__init__()
        self.linear = linear
        self.lora = LoRALayer(linear.in_features, linear.out_features, rank, alpha)
        self.m = nn.Parameter(self.linear.weight.norm(p=2, dim=0, keepdim=True))

    def forward(self, x):
        lora = self.lora.A @ self.lora.B
        combined_weight = self.linear.weight + self.lora.alpha * lora.T
        column_norm = combined_weight.norm(p=2, dim=0, keepdim=True)
        V = combined_weight / column_norm
        new_weight = self.m * V
        return F.linear(x, new_weight, self.linear.bias)


def compute_accuracy(model, data_loader):
    model.eval()
    correct_pred, num_examples = 0, 0
    with torch.no_grad():
        for features, targets in data_loader:
            _, predicted_labels = torch.max(model(features), 1)
            num_examples += targets.size(0)
            correct_pred += (predicted_labels == targets).sum()
    return correct_pred.float() / num_examples * 100


def train(num_epochs, model, optimizer, train_loader):
    start_time = time.time()
    for epoch in range(num_epochs):
        model.train()
        for batch_idx, (features, targets) in enumerate(train_loader):
            logits = model(features)
            loss = F.cross_entropy(logits, targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if not batch_idx % 25:
                print("Epoch: %03d/%03d | Batch %03d/%03d | Loss: %.4f"
                      % (epoch + 1, num_epochs, batch_idx, len(train_loader), loss.item()))
        print("Epoch: %03d/%03d training accuracy: %.2f%%"
              % (epoch + 1, num_epochs, compute_accuracy(model, train_loader)))
    print("Total Training Time: %.2f min" % ((time.time() - start_time) / 60))


def freeze_linear_layers(model):
    for child in model.children():
        if isinstance(child, nn.Linear):
            for param in child.parameters():
                param.requires_grad = False
        else:
            freeze_linear_layers(child)


##########################
### PRETRAIN
##########################
model_pretrained = MultilayerPerceptron(num_features, num_hidden_1, num_hidden_2, num_classes).to(DEVICE)
optimizer_pretrained = torch.optim.Adam(model_pretrained.parameters(), lr=learning_rate)
train(1, model_pretrained, optimizer_pretrained, source_loader)
print(f"Target accuracy orig model: {compute_accuracy(model_pretrained, target_test_loader):.2f}%")

model_lora = copy.deepcopy(model_pretrained)
model_dora = copy.deepcopy(model_pretrained)

model_lora.layers[0] = LinearWithLoRAMerged(model_lora.layers[0], rank=4, alpha=8)
model_lora.layers[2] = LinearWithLoRAMerged(model_lora.layers[2], rank=4, alpha=8)
model_lora.layers[4] = LinearWithLoRAMerged(model_lora.layers[4], rank=4, alpha=8)
model_lora.to(DEVICE)
optimizer_lora = torch.optim.Adam(model_lora.parameters(), lr=learning_rate)

model_dora.layers[0] = LinearWithDoRAMerged(model_dora.layers[0], rank=4, alpha=8)
model_dora.layers[2] = LinearWithDoRAMerged(model_dora.layers[2], rank=4, alpha=8)
model_dora.layers[4] = LinearWithDoRAMerged(model_dora.layers[4], rank=4, alpha=8)
model_dora.to(DEVICE)
optimizer_dora = torch.optim.Adam(model_lora.parameters(), lr=learning_rate)

##########################
### LoRA FINETUNE
##########################
freeze_linear_layers(model_lora)
train(num_epochs, model_lora, optimizer_lora, target_loader)
print(f"Target accuracy LoRA finetune: {compute_accuracy(model_lora, target_test_loader):.2f}%")

##########################
### DoRA FINETUNE
##########################
freeze_linear_layers(model_dora)
for name, param in model_dora.named_parameters():
    print(f"{name}: {param.requires_grad}")
train(num_epochs, model_dora, optimizer_dora, target_loader)
print(f"Target accuracy DoRA finetune: {compute_accuracy(model_dora, target_test_loader):.2f}%")
