"""Normalizer-free ResNet (NF-ResNet) on small synthetic images, trained with adaptive gradient clipping.

No BatchNorm anywhere: convolutions are ScaledStdConv2d (weight standardisation with a learnable
gain, as in timm's std_conv.py), the residual branch input is downscaled by 1/beta (the expected
std of the signal) and the branch output is multiplied by alpha, and the ReLU is a "gamma" ReLU
that rescales by the analytic gain 1.7139 so activations keep unit variance. Gradients are clipped
unit-wise relative to the weight norm (AGC, timm/utils/agc.py), except for the classifier head.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

EPOCHS = 5
BATCH_SIZE = 64
LR = 0.1
CLIP_FACTOR = 0.01
NUM_CLASSES = 4


def unitwise_norm(x, norm_type=2.0):
    if x.ndim <= 1:
        return x.norm(norm_type)
    else:
        return x.norm(norm_type, dim=tuple(range(1, x.ndim)), keepdim=True)


def adaptive_clip_grad(parameters, clip_factor=0.01, eps=1e-3, norm_type=2.0):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    for p in parameters:
        if p.grad is None:
            continue
        p_data = p.detach()
        g_data = p.grad.detach()
        max_norm = unitwise_norm(p_data, norm_type=norm_type).clamp_(min=eps).mul_(clip_factor)
        grad_norm = unitwise_norm(g_data, norm_type=norm_type)
        clipped_grad = g_data * (max_norm / grad_norm.clamp(min=1e-6))
        new_grads = torch.where(grad_norm < max_norm, g_data, clipped_grad)
        p.grad.detach().copy_(new_grads)


class ScaledStdConv2d(nn.Conv2d):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 bias=True, gamma=1.0, eps=1e-6, gain_init=1.0):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride,
                         padding=padding, bias=bias)
        self.gain = nn.Parameter(torch.full((self.out_channels, 1, 1, 1), gain_init))
        self.scale = gamma * self.weight[0].numel() ** -0.5
        self.eps = eps

    def forward(self, x):
        weight = F.batch_norm(
            self.weight.reshape(1, self.out_channels, -1), None, None,
            weight=(self.gain * self.scale).view(-1),
            training=True, momentum=0., eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class GammaAct(nn.Module):
    def __init__(self, gamma=1.7139726770961483):
        super().__init__()
        self.gamma = gamma

    def forward(self, x):
        return F.relu(x) * self.gamma


class NormFreeBlock(nn.Module):
    def __init__(self, in_chs, out_chs, stride=1, alpha=0.2, beta=1.0):
        super().__init__()
        self.alpha = alpha
        self.beta = beta
        self.act1 = GammaAct()
        self.conv1 = ScaledStdConv2d(in_chs, out_chs, 3, stride=stride, padding=1)
        self.act2 = GammaAct()
        self.conv2 = ScaledStdConv2d(out_chs, out_chs, 3, padding=1)
        if stride != 1 or in_chs != out_chs:
            self.downsample = ScaledStdConv2d(in_chs, out_chs, 1, stride=stride)
        else:
            self.downsample = None

    def forward(self, x):
        out = self.act1(x) * (1.0 / self.beta)
        shortcut = x
        if self.downsample is not None:
            shortcut = self.downsample(out)
        out = self.conv1(out)
        out = self.conv2(self.act2(out))
        return out * self.alpha + shortcut


class NFResNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES, alpha=0.2):
        super().__init__()
        self.stem = ScaledStdConv2d(1, 16, 3, padding=1)
        blocks = []
        expected_var = 1.0
        chs = [(16, 16, 1), (16, 32, 2), (32, 32, 1), (32, 64, 2)]
        for in_c, out_c, s in chs:
            beta = expected_var ** 0.5
            blocks.append(NormFreeBlock(in_c, out_c, stride=s, alpha=alpha, beta=beta))
            if s != 1 or in_c != out_c:
                expected_var = 1.0
            expected_var += alpha ** 2
        self.stages = nn.Sequential(*blocks)
        self.final_act = GammaAct()
        self.head = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.stem(x)
        x = self.stages(x)
        x = self.final_act(x)
        x = x.mean(dim=(2, 3))
        return self.head(x)


def make_images(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
    imgs = torch.randn(n, 1, 16, 16, generator=g) * 1.0
    coords = torch.arange(16).float()
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    patterns = torch.stack([
        torch.sin(xx * 0.8),
        torch.sin(yy * 0.8),
        torch.sin((xx + yy) * 0.6),
        torch.sin((xx - yy) * 0.6),
    ])
    phase = torch.randint(0, 4, (n,), generator=g)
    for i in range(n):
        imgs[i, 0] += 0.6 * torch.roll(patterns[y[i]], shifts=int(phase[i]), dims=1)
    return imgs, y


x_train, y_train = make_images(1280, seed=1)
x_test, y_test = make_images(512, seed=2)
train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=BATCH_SIZE, shuffle=True)

model = NFResNet()
optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9, nesterov=True, weight_decay=5e-5)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=EPOCHS * len(train_loader))
clip_params = [p for n, p in model.named_parameters() if not n.startswith("head.")]


def evaluate():
    model.eval()
    with torch.no_grad():
        logits = model(x_test)
        loss = F.cross_entropy(logits, y_test).item()
        acc = (logits.argmax(1) == y_test).float().mean().item()
    model.train()
    return loss, acc


loss0, acc0 = evaluate()
print(f"init: test loss {loss0:.4f} test acc {acc0:.3f}")
for epoch in range(EPOCHS):
    running = 0.0
    for step, (images, labels) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(images)
        loss = F.cross_entropy(output, labels)
        loss.backward()
        adaptive_clip_grad(clip_params, clip_factor=CLIP_FACTOR)
        optimizer.step()
        scheduler.step()
        running += loss.item()
    test_loss, test_acc = evaluate()
    print(f"epoch {epoch}: train loss {running / len(train_loader):.4f} "
          f"test loss {test_loss:.4f} test acc {test_acc:.3f} lr {scheduler.get_last_lr()[0]:.4f}")
