"""EfficientNet-style classifier (MBConv blocks with squeeze-and-excitation, swish,
drop connect, TF-style BatchNorm momentum/eps) trained on synthetic 12x12 texture images."""
import math
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class Swish(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(x)


def drop_connect(inputs, p, training):
    assert 0 <= p <= 1, 'p must be in range of [0,1]'
    if not training:
        return inputs
    batch_size = inputs.shape[0]
    keep_prob = 1 - p
    random_tensor = keep_prob
    random_tensor += torch.rand([batch_size, 1, 1, 1], dtype=inputs.dtype, device=inputs.device)
    binary_tensor = torch.floor(random_tensor)
    output = inputs / keep_prob * binary_tensor
    return output


class Conv2dSamePadding(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, dilation=1, groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, 0, dilation, groups, bias)
        self.stride = self.stride if len(self.stride) == 2 else [self.stride[0]] * 2

    def forward(self, x):
        ih, iw = x.size()[-2:]
        kh, kw = self.weight.size()[-2:]
        sh, sw = self.stride
        oh, ow = math.ceil(ih / sh), math.ceil(iw / sw)
        pad_h = max((oh - 1) * self.stride[0] + (kh - 1) * self.dilation[0] + 1 - ih, 0)
        pad_w = max((ow - 1) * self.stride[1] + (kw - 1) * self.dilation[1] + 1 - iw, 0)
        if pad_h > 0 or pad_w > 0:
            x = F.pad(x, [pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2])
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class MBConvBlock(nn.Module):
    def __init__(self, input_filters, output_filters, expand_ratio, kernel_size, stride, se_ratio,
                 bn_mom=0.1, bn_eps=1e-3, id_skip=True):
        super().__init__()
        self._bn_mom = bn_mom
        self._bn_eps = bn_eps
        self.has_se = (se_ratio is not None) and (0 < se_ratio <= 1)
        self.id_skip = id_skip
        self.input_filters, self.output_filters, self.stride = input_filters, output_filters, stride
        self.expand_ratio = expand_ratio

        inp = input_filters
        oup = input_filters * expand_ratio
        if expand_ratio != 1:
            self._expand_conv = Conv2dSamePadding(inp, oup, kernel_size=1, bias=False)
            self._bn0 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)

        self._depthwise_conv = Conv2dSamePadding(oup, oup, groups=oup, kernel_size=kernel_size,
                                                 stride=stride, bias=False)
        self._bn1 = nn.BatchNorm2d(num_features=oup, momentum=self._bn_mom, eps=self._bn_eps)

        if self.has_se:
            num_squeezed_channels = max(1, int(input_filters * se_ratio))
            self._se_reduce = Conv2dSamePadding(oup, num_squeezed_channels, kernel_size=1)
            self._se_expand = Conv2dSamePadding(num_squeezed_channels, oup, kernel_size=1)

        self._project_conv = Conv2dSamePadding(oup, output_filters, kernel_size=1, bias=False)
        self._bn2 = nn.BatchNorm2d(num_features=output_filters, momentum=self._bn_mom, eps=self._bn_eps)
        self._swish = Swish()

    def forward(self, inputs, drop_connect_rate=None):
        x = inputs
        if self.expand_ratio != 1:
            x = self._expand_conv(inputs)
            x = self._bn0(x)
            x = self._swish(x)

        x = self._depthwise_conv(x)
        x = self._bn1(x)
        x = self._swish(x)

        if self.has_se:
            x_squeezed = F.adaptive_avg_pool2d(x, 1)
            x_squeezed = self._se_reduce(x_squeezed)
            x_squeezed = self._swish(x_squeezed)
            x_squeezed = self._se_expand(x_squeezed)
            x = torch.sigmoid(x_squeezed) * x

        x = self._project_conv(x)
        x = self._bn2(x)

        if self.id_skip and self.stride == 1 and self.input_filters == self.output_filters:
            if drop_connect_rate:
                x = drop_connect(x, p=drop_connect_rate, training=self.training)
            x = x + inputs
        return x


# (expand_ratio, kernel, stride, in, out, repeats) -- a shrunken B0 layout
BLOCKS_ARGS = [
    (1, 3, 1, 16, 8, 1),
    (4, 3, 2, 8, 12, 2),
    (4, 5, 2, 12, 20, 2),
    (4, 3, 1, 20, 32, 1),
]


class EfficientNet(nn.Module):
    def __init__(self, num_classes=4, drop_connect_rate=0.2, dropout_rate=0.2, bn_mom=0.1, bn_eps=1e-3):
        super().__init__()
        self.drop_connect_rate = drop_connect_rate
        out_channels = 16
        self._conv_stem = Conv2dSamePadding(3, out_channels, kernel_size=3, stride=1, bias=False)
        self._bn0 = nn.BatchNorm2d(num_features=out_channels, momentum=bn_mom, eps=bn_eps)

        self._blocks = nn.ModuleList([])
        for expand, k, s, cin, cout, repeats in BLOCKS_ARGS:
            self._blocks.append(MBConvBlock(cin, cout, expand, k, s, se_ratio=0.25))
            for _ in range(repeats - 1):
                self._blocks.append(MBConvBlock(cout, cout, expand, k, 1, se_ratio=0.25))

        in_channels = BLOCKS_ARGS[-1][4]
        out_channels = 128
        self._conv_head = Conv2dSamePadding(in_channels, out_channels, kernel_size=1, bias=False)
        self._bn1 = nn.BatchNorm2d(num_features=out_channels, momentum=bn_mom, eps=bn_eps)

        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._dropout = nn.Dropout(dropout_rate)
        self._fc = nn.Linear(out_channels, num_classes)
        self._swish = Swish()

    def extract_features(self, inputs):
        x = self._swish(self._bn0(self._conv_stem(inputs)))
        for idx, block in enumerate(self._blocks):
            drop_connect_rate = self.drop_connect_rate
            if drop_connect_rate:
                drop_connect_rate *= float(idx) / len(self._blocks)
            x = block(x, drop_connect_rate=drop_connect_rate)
        x = self._swish(self._bn1(self._conv_head(x)))
        return x

    def forward(self, inputs):
        x = self.extract_features(inputs)
        x = self._avg_pooling(x)
        x = x.flatten(start_dim=1)
        x = self._dropout(x)
        x = self._fc(x)
        return x


class TextureDataset(Dataset):
    """4 classes: horizontal, vertical, diagonal gratings and a checkerboard, random frequency,
    phase and colour, plus noise."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 4, (n,), generator=g)
        yy, xx = torch.meshgrid(torch.arange(12.), torch.arange(12.), indexing='ij')
        freq = 0.5 + 0.6 * torch.rand(n, 1, 1, generator=g)
        phase = 2 * math.pi * torch.rand(n, 1, 1, generator=g)
        h = torch.sin(freq * yy + phase)
        v = torch.sin(freq * xx + phase)
        d = torch.sin(freq * (xx + yy) / 1.41 + phase)
        c = torch.sin(freq * yy + phase) * torch.sin(freq * xx + phase)
        patterns = torch.stack([h, v, d, c], 1)[torch.arange(n), self.labels]
        colour = torch.rand(n, 3, 1, 1, generator=g) + 0.3
        self.images = patterns[:, None] * colour + 0.5 * torch.randn(n, 3, 12, 12, generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.images[i], self.labels[i]


train_loader = DataLoader(TextureDataset(512, seed=1), batch_size=32, shuffle=True)
val_loader = DataLoader(TextureDataset(256, seed=2), batch_size=128)

model = EfficientNet(num_classes=4)
print("params:", sum(p.numel() for p in model.parameters()))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
epochs = 5
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=epochs * len(train_loader))


def validate():
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for images, target in val_loader:
            output = model(images)
            loss_sum += criterion(output, target).item() * len(target)
            correct += (output.argmax(1) == target).sum().item()
            total += len(target)
    model.train()
    return loss_sum / total, correct / total


vloss, vacc = validate()
print(f"init    val loss {vloss:.4f}  val acc@1 {vacc:.3f}")
step = 0
for epoch in range(epochs):
    model.train()
    run_loss, run_correct, seen = 0.0, 0, 0
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        step += 1

        run_loss += loss.item() * len(target)
        run_correct += (output.argmax(1) == target).sum().item()
        seen += len(target)
        if step % 20 == 0:
            print(f"  step {step}  loss {loss.item():.4f}  lr {scheduler.get_last_lr()[0]:.4f}")
    vloss, vacc = validate()
    print(f"Epoch {epoch}: train loss {run_loss / seen:.4f}  train acc {run_correct / seen:.3f}  "
          f"val loss {vloss:.4f}  val acc@1 {vacc:.3f}")
