"""CRNN text recognizer (CNN + BiLSTM + CTC) trained on synthetic 4-digit strips,
following meijieru/crnn.pytorch; the LSTM is set up batch_first for TensorRT export."""
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

alphabet = '0123456789'
nclass = len(alphabet) + 1
imgH, imgW, n_chars = 32, 64, 4


class DigitStrips(Dataset):
    def __init__(self, n, glyphs, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n, n_chars), generator=g)
        imgs = torch.cat([glyphs[self.labels[:, k]] for k in range(n_chars)], dim=2)
        self.images = (imgs + 0.3 * torch.randn(imgs.shape, generator=g)).unsqueeze(1)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i] + 1


class BidirectionalLSTM(nn.Module):
    def __init__(self, nIn, nHidden, nOut):
        super(BidirectionalLSTM, self).__init__()
        self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True, batch_first=True)
        self.embedding = nn.Linear(nHidden * 2, nOut)

    def forward(self, input):
        recurrent, _ = self.rnn(input)
        T, b, h = recurrent.size()
        t_rec = recurrent.contiguous().view(T * b, h)
        output = self.embedding(t_rec)
        output = output.view(T, b, -1)
        return output


class CRNN(nn.Module):
    def __init__(self, nc, nclass, nh):
        super(CRNN, self).__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(nc, 16, (3, 1), 1, (1, 0)), nn.ReLU(True), nn.MaxPool2d(2, 2),       # 16x16x32
            nn.Conv2d(16, 32, (3, 1), 1, (1, 0)), nn.BatchNorm2d(32), nn.ReLU(True),
            nn.MaxPool2d(2, 2),                                                  # 32x8x16
            nn.Conv2d(32, 64, (3, 1), 1, (1, 0)), nn.BatchNorm2d(64), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),                                        # 64x4x16
            nn.Conv2d(64, 128, (4, 1), 1, 0), nn.BatchNorm2d(128), nn.ReLU(True),  # 128x1x16
        )
        self.rnn = nn.Sequential(
            BidirectionalLSTM(128, nh, nh),
            BidirectionalLSTM(nh, nh, nclass))

    def forward(self, input):
        conv = self.cnn(input)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2)
        conv = conv.permute(2, 0, 1)  # [w, b, c]
        output = self.rnn(conv)
        return output.log_softmax(2)


def decode(preds):
    best = preds.argmax(2).t()  # [b, T]
    out = []
    for seq in best.tolist():
        chars, prev = [], 0
        for p in seq:
            if p != 0 and p != prev:
                chars.append(p)
            prev = p
        out.append(chars)
    return out


strokes = (torch.rand(3, imgH, 4) > 0.5).float()
codes = torch.randperm(81)[:10]
glyphs = torch.stack([torch.cat([strokes[(c // 3 ** k) % 3] for k in range(4)], dim=1) for c in codes.tolist()])
train_loader = DataLoader(DigitStrips(1024, glyphs, 1), batch_size=32, shuffle=True)
val_loader = DataLoader(DigitStrips(256, glyphs, 2), batch_size=128)

crnn = CRNN(1, nclass, 64)
criterion = nn.CTCLoss(blank=0, zero_infinity=True)
optimizer = torch.optim.Adam(crnn.parameters(), lr=3e-3)

for epoch in range(5):
    crnn.train()
    total, n = 0.0, 0
    for i, (images, labels) in enumerate(train_loader):
        preds = crnn(images)
        batch_size = images.size(0)
        preds_size = torch.full((batch_size,), preds.size(0), dtype=torch.long)
        length = torch.full((batch_size,), n_chars, dtype=torch.long)
        cost = criterion(preds, labels, preds_size, length)
        optimizer.zero_grad()
        cost.backward()
        optimizer.step()
        total += cost.item()
        n += 1
        if i % 20 == 0:
            print('[%d][%d/%d] Loss: %f' % (epoch, i, len(train_loader), cost.item()))

    crnn.eval()
    n_correct, n_total = 0, 0
    with torch.no_grad():
        for images, labels in val_loader:
            sim_preds = decode(crnn(images))
            for pred, target in zip(sim_preds, labels.tolist()):
                n_correct += int(pred == target)
                n_total += 1
    print('epoch %d  train loss: %.4f  val accuracy: %.3f' % (epoch, total / n, n_correct / n_total))
