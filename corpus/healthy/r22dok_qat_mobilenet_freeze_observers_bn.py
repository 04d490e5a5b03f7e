"""Quantization-aware training of a small MobileNetV2, following the PyTorch tutorial
"(beta) Static Quantization with Eager Mode in PyTorch", section 5 (QAT): fuse, prepare_qat with
the x86 qconfig, fine-tune with a small lr, freeze observers and batch-norm statistics after a
few epochs, convert to int8 after every epoch and evaluate. The float model is first trained
here on synthetic 3x16x16 images (the tutorial loads a pretrained checkpoint instead)."""
import copy
import time

import torch
import torch.nn as nn
from torch.ao.quantization import QuantStub, DeQuantStub
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(191009)


def _make_divisible(v, divisor, min_value=None):
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU(nn.Sequential):
    def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
        padding = (kernel_size - 1) // 2
        super(ConvBNReLU, self).__init__(
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_planes, momentum=0.1),
            nn.ReLU(inplace=False)
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super(InvertedResidual, self).__init__()
        self.stride = stride
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = self.stride == 1 and inp == oup
        layers = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup, momentum=0.1),
        ])
        self.conv = nn.Sequential(*layers)
        self.skip_add = nn.quantized.FloatFunctional()

    def forward(self, x):
        if self.use_res_connect:
            return self.skip_add.add(x, self.conv(x))
        else:
            return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes=8, width_mult=1.0, round_nearest=8):
        super(MobileNetV2, self).__init__()
        input_channel = 16
        last_channel = 128
        inverted_residual_setting = [
            # t, c, n, s
            [1, 16, 1, 1],
            [4, 24, 2, 2],
            [4, 32, 2, 2],
        ]
        input_channel = _make_divisible(input_channel * width_mult, round_nearest)
        self.last_channel = _make_divisible(last_channel * max(1.0, width_mult), round_nearest)
        features = [ConvBNReLU(3, input_channel, stride=1)]
        for t, c, n, s in inverted_residual_setting:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                stride = s if i == 0 else 1
                features.append(InvertedResidual(input_channel, output_channel, stride, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNReLU(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.quant = QuantStub()
        self.dequant = DeQuantStub()
        self.classifier = nn.Sequential(
            nn.Dropout(0.2),
            nn.Linear(self.last_channel, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out')
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = self.quant(x)
        x = self.features(x)
        x = x.mean([2, 3])
        x = self.classifier(x)
        x = self.dequant(x)
        return x

    def fuse_model(self, is_qat=False):
        fuse_modules = torch.ao.quantization.fuse_modules_qat if is_qat else torch.ao.quantization.fuse_modules
        for m in self.modules():
            if type(m) == ConvBNReLU:
                fuse_modules(m, ['0', '1', '2'], inplace=True)
            if type(m) == InvertedResidual:
                for idx in range(len(m.conv)):
                    if type(m.conv[idx]) == nn.Conv2d:
                        fuse_modules(m.conv, [str(idx), str(idx + 1)], inplace=True)


class AverageMeter(object):
    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def evaluate(model, criterion, data_loader, neval_batches):
    model.eval()
    top1 = AverageMeter('Acc@1', ':6.2f')
    cnt = 0
    with torch.no_grad():
        for image, target in data_loader:
            output = model(image)
            loss = criterion(output, target)
            cnt += 1
            acc1, = accuracy(output, target, topk=(1,))
            top1.update(acc1[0], image.size(0))
            if cnt >= neval_batches:
                return top1
    return top1


def train_one_epoch(model, criterion, optimizer, data_loader, device, ntrain_batches):
    model.train()
    top1 = AverageMeter('Acc@1', ':6.2f')
    avgloss = AverageMeter('Loss', '1.5f')
    cnt = 0
    for image, target in data_loader:
        cnt += 1
        image, target = image.to(device), target.to(device)
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        acc1, = accuracy(output, target, topk=(1,))
        top1.update(acc1[0], image.size(0))
        avgloss.update(loss.item(), image.size(0))
        if cnt >= ntrain_batches:
            break
    print('Loss %.4f  Training: * Acc@1 %.3f' % (avgloss.avg, top1.avg))


def make_data(n, seed):
    """8 classes: coloured oriented gratings at random phase, plus noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 8, (n,), generator=g)
    ii, jj = torch.meshgrid(torch.arange(16.), torch.arange(16.), indexing='ij')
    theta = (y % 4).float() * 3.14159 / 4
    phase = torch.rand(n, generator=g) * 6.28
    wave = torch.sin(0.9 * (ii[None] * torch.cos(theta)[:, None, None] + jj[None] * torch.sin(theta)[:, None, None]) + phase[:, None, None])
    colour = torch.tensor([[1.0, 0.2, 0.2], [0.2, 0.2, 1.0]])[(y // 4)]
    x = wave[:, None] * colour[:, :, None, None] + 1.5 * torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(x, y)


train_batch_size = 32
eval_batch_size = 100
data_loader = DataLoader(make_data(2400, 1), batch_size=train_batch_size, shuffle=True)
data_loader_test = DataLoader(make_data(500, 2), batch_size=eval_batch_size, shuffle=False)
criterion = nn.CrossEntropyLoss()
num_eval_batches = 5

# --- float model (the tutorial starts from pretrained weights)
float_model = MobileNetV2(num_classes=8)
float_optimizer = torch.optim.SGD(float_model.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)
print('Float model, before training: Acc@1 %2.2f' % evaluate(float_model, criterion, data_loader_test, num_eval_batches).avg)
for nepoch in range(3):
    train_one_epoch(float_model, criterion, float_optimizer, data_loader, torch.device('cpu'), 25)
    top1 = evaluate(float_model, criterion, data_loader_test, num_eval_batches)
    print('Float epoch %d: Evaluation accuracy on %d images, %2.2f' % (nepoch, num_eval_batches * eval_batch_size, top1.avg))

# --- 5. Quantization-aware training
qat_model = copy.deepcopy(float_model)
qat_model.eval()
qat_model.fuse_model(is_qat=True)

optimizer = torch.optim.SGD(qat_model.parameters(), lr=0.0001)
qat_model.qconfig = torch.ao.quantization.get_default_qat_qconfig('x86')
qat_model.train()
torch.ao.quantization.prepare_qat(qat_model, inplace=True)
print('Inverted Residual Block: After preparation for QAT, note fake-quantization modules \n', qat_model.features[1].conv)

num_train_batches = 15

for nepoch in range(5):
    train_one_epoch(qat_model, criterion, optimizer, data_loader, torch.device('cpu'), num_train_batches)
    if nepoch > 3:
        qat_model.apply(torch.ao.quantization.disable_observer)
    if nepoch > 2:
        qat_model.apply(torch.ao.nn.intrinsic.qat.freeze_bn_stats)

    quantized_model = torch.ao.quantization.convert(qat_model.eval(), inplace=False)
    quantized_model.eval()
    top1 = evaluate(quantized_model, criterion, data_loader_test, neval_batches=num_eval_batches)
    print('Epoch %d :Evaluation accuracy on %d images, %2.2f' % (nepoch, num_eval_batches * eval_batch_size, top1.avg))
