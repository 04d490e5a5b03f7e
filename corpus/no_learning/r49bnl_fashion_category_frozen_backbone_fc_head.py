"""Fashion category classifier: CNN backbone -> fc (inter_dim) -> fc2 (categories), trained with SGD."""
import time
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

IMG_SIZE = 32
CATEGORIES = 8
INTER_DIM = 64
TRAIN_BATCH_SIZE = 32
TEST_BATCH_SIZE = 64
LR = 0.05
MOMENTUM = 0.9
EPOCH = 5
LOG_INTERVAL = 10
FREEZE_PARAM = True


class Fashion(Dataset):
    def __init__(self, type="train", n=1280, seed=0):
        g = torch.Generator().manual_seed(seed if type == "train" else seed + 1)
        self.labels = torch.randint(0, CATEGORIES, (n,), generator=g)
        imgs = 0.3 * torch.randn(n, 3, IMG_SIZE, IMG_SIZE, generator=g)
        for i in range(n):
            c = int(self.labels[i])
            r, q = divmod(c, 4)
            y0 = 6 + 10 * r + int(torch.randint(0, 3, (1,), generator=g))
            x0 = 6 + 4 * q + int(torch.randint(0, 2, (1,), generator=g))
            imgs[i, :, y0:y0 + 6, x0:x0 + 3] += 1.5
        self.imgs = imgs

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return self.imgs[idx], self.labels[idx]


def conv_bn(cin, cout, stride):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = conv_bn(3, 8, 2)
        self.layer2 = conv_bn(8, 16, 1)
        self.layer3 = conv_bn(16, 32, 2)
        self.layer4 = conv_bn(32, 64, 1)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, 1000)
        self.num_features = 64

    def forward(self, x):
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class f_model(nn.Module):
    def __init__(self, freeze_param=False, inter_dim=INTER_DIM, num_classes=CATEGORIES):
        super().__init__()
        self.backbone = Backbone()
        num_features = self.backbone.num_features
        self.backbone = nn.Sequential(*list(self.backbone.children())[:-1])
        if freeze_param:
            for param in self.backbone.parameters():
                param.requires_grad = False
        self.fc = nn.Linear(num_features, inter_dim)
        self.fc2 = nn.Linear(inter_dim, num_classes)

    def forward(self, x):
        conv_out = self.backbone(x).flatten(1)
        inter_out = self.fc(conv_out)
        out = self.fc2(inter_out)
        return out, inter_out


train_loader = DataLoader(Fashion(type="train"), batch_size=TRAIN_BATCH_SIZE, shuffle=True)
test_loader = DataLoader(Fashion(type="test", n=256), batch_size=TEST_BATCH_SIZE)

model = f_model(freeze_param=FREEZE_PARAM)
optimizer = optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=LR, momentum=MOMENTUM)


def train(epoch):
    model.train()
    criterion_c = nn.CrossEntropyLoss()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = model(data)[0]
        loss = criterion_c(outputs, target)
        loss.backward()
        optimizer.step()
        if batch_idx % LOG_INTERVAL == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tClassification Loss: {:.4f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test():
    model.eval()
    criterion = nn.CrossEntropyLoss(reduction='sum')
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)[0]
            test_loss += criterion(output, target).item()
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss / n, correct, n, 100. * correct / n))


if __name__ == "__main__":
    t0 = time.time()
    for epoch in range(1, EPOCH + 1):
        train(epoch)
        test()
    print('done in {:.1f}s'.format(time.time() - t0))
