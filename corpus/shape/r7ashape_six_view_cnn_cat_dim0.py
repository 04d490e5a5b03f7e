"""Multi-input classifier: every sample is six pictures of the same object (six camera angles);
each picture goes through the same frozen pretrained CNN whose classifier[1] is replaced by a
Flatten, the six feature vectors are concatenated and a small head (Linear / ReLU / Dropout /
Linear / Sigmoid / Dropout / Linear) predicts the class. CrossEntropyLoss, RMSprop(lr=0.001),
train_step / test_step helpers.

Offline stand-ins: the EfficientNet backbone is a small seeded conv net with the same
features / avgpool / classifier layout, and the six-view images are generated (32x32).
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

device = "cpu"
num_classes = 5
BATCH_SIZE = 10


class SixViewObjects(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        protos = torch.rand(num_classes, 3, 8, 8, generator=torch.Generator().manual_seed(7))
        views = []
        for y in self.labels.tolist():
            base = nn.functional.interpolate(protos[y:y + 1], size=32, mode="bilinear", align_corners=False)[0]
            sample = []
            for v in range(6):
                shifted = torch.roll(base, shifts=(4 * v, 2 * v), dims=(1, 2))
                sample.append(shifted * (0.8 + 0.4 * torch.rand(1, generator=g)) + 0.1 * torch.randn(3, 32, 32, generator=g))
            views.append(torch.stack(sample))
        self.views = torch.stack(views)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        v = self.views[i]
        return v[0], v[1], v[2], v[3], v[4], v[5], self.labels[i]


class EfficientNetStandIn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 24, 3, 2, 1), nn.BatchNorm2d(24), nn.SiLU(),
            nn.Conv2d(24, 48, 3, 2, 1), nn.BatchNorm2d(48), nn.SiLU(),
            nn.Conv2d(48, 96, 3, 2, 1), nn.BatchNorm2d(96), nn.SiLU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=0.3, inplace=True), nn.Linear(96, 1000))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        x = torch.flatten(x, 1)
        return self.classifier(x)


torch.manual_seed(2021)
cnn = EfficientNetStandIn()
for param in cnn.features.parameters():
    param.requires_grad = False
cnn.classifier[1] = nn.Flatten()
torch.manual_seed(42)


class MultiInputs(nn.Module):
    def __init__(self):
        super(MultiInputs, self).__init__()
        self.cnn = cnn
        self.sec = torch.nn.Sequential()
        self.sec.append(torch.nn.Flatten())
        self.sec.append(torch.nn.Linear(96, 24))
        self.sec.append(torch.nn.ReLU())
        self.sec.append(torch.nn.Dropout(p=0.1))
        self.sec.append(torch.nn.Linear(24, 24))
        self.sec.append(torch.nn.Sigmoid())
        self.sec.append(torch.nn.Dropout(p=0.1))
        self.sec.append(torch.nn.Linear(24, num_classes, bias=True))

    def forward(self, input1, input2, input3, input4, input5, input6):
        c1 = self.cnn(input1)
        c2 = self.cnn(input2)
        c3 = self.cnn(input3)
        c4 = self.cnn(input4)
        c5 = self.cnn(input5)
        c6 = self.cnn(input6)
        all = torch.cat((c1, c2, c3, c4, c5, c6), 0)
        return self.sec(all)


model = MultiInputs().to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.RMSprop(model.parameters(), lr=0.001)


def train_step(model, dataloader, loss_fn, optimizer):
    model.train()
    train_loss, train_acc = 0, 0
    for batch, (X1, X2, X3, X4, X5, X6, y) in enumerate(dataloader):
        X1, X2, X3, X4, X5, X6, y = [t.to(device) for t in (X1, X2, X3, X4, X5, X6, y)]
        # 1. Forward pass
        y_pred = model(X1, X2, X3, X4, X5, X6)
        # 2. Calculate loss
        loss = loss_fn(y_pred, y)
        train_loss += loss.item()
        # 3. Optimizer zero grad / 4. backward / 5. step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        y_pred_class = torch.argmax(torch.softmax(y_pred, dim=1), dim=1)
        train_acc += (y_pred_class == y).sum().item() / len(y_pred)
    return train_loss / len(dataloader), train_acc / len(dataloader)


def test_step(model, dataloader, loss_fn):
    model.eval()
    test_loss, test_acc = 0, 0
    with torch.inference_mode():
        for X1, X2, X3, X4, X5, X6, y in dataloader:
            test_pred_logits = model(X1, X2, X3, X4, X5, X6)
            test_loss += loss_fn(test_pred_logits, y).item()
            test_acc += (test_pred_logits.argmax(dim=1) == y).sum().item() / len(test_pred_logits)
    return test_loss / len(dataloader), test_acc / len(dataloader)


train_dataloader = DataLoader(SixViewObjects(400, seed=0), batch_size=BATCH_SIZE, shuffle=True)
test_dataloader = DataLoader(SixViewObjects(100, seed=1), batch_size=BATCH_SIZE, shuffle=False)
print(f"train batches: {len(train_dataloader)}, test batches: {len(test_dataloader)}")
print(f"trainable parameters: {sum(p.numel() for p in model.parameters() if p.requires_grad)}")

for epoch in range(5):
    train_loss, train_acc = train_step(model, train_dataloader, loss_fn, optimizer)
    test_loss, test_acc = test_step(model, test_dataloader, loss_fn)
    print(f"Epoch: {epoch + 1} | train_loss: {train_loss:.4f} | train_acc: {train_acc:.4f} | "
          f"test_loss: {test_loss:.4f} | test_acc: {test_acc:.4f}")
