"""Fast neural style transfer as in pytorch/examples fast_neural_style/neural_style: a feed-forward
TransformerNet (reflection-padded convs, InstanceNorm, residual blocks, upsample-conv) is trained against a
frozen VGG-like loss network with a content loss on relu2_2 and a Gram-matrix style loss on four layers,
content_weight 1e5 and style_weight 1e10 as in the example. COCO and the VGG16 checkpoint are replaced by
synthetic 32x32 scenes and a small fixed random conv stack (no downloads)."""
import math
from collections import namedtuple
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(42)
device = torch.device("cpu")

content_weight = 1e5
style_weight = 1e10
lr = 1e-3
epochs = 2
batch_size = 8
log_interval = 8


class SceneDataset(Dataset):
    def __init__(self, n, size=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        imgs = []
        yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
        for _ in range(n):
            bg = torch.rand(3, 1, 1, generator=g) * 0.5
            img = bg.expand(3, size, size).clone()
            for _ in range(2):
                cx, cy = (torch.rand(2, generator=g) * size).tolist()
                r = 4 + 6 * torch.rand(1, generator=g).item()
                col = torch.rand(3, 1, generator=g)
                m = ((xx - cx) ** 2 + (yy - cy) ** 2 < r * r).float()
                img = img * (1 - m) + col.view(3, 1, 1) * m
            imgs.append(img)
        self.x = torch.stack(imgs).mul(255)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], 0


def style_image(size=32):
    yy, xx = torch.meshgrid(torch.arange(size).float(), torch.arange(size).float(), indexing="ij")
    s = torch.stack([torch.sin((xx + yy) / 2.0), torch.sin(xx / 1.5), torch.cos(yy / 3.0)])
    return ((s + 1) / 2).mul(255)


class ConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = nn.InstanceNorm2d(channels, affine=True)
        self.relu = nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        if self.upsample:
            x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = ConvLayer(3, 16, kernel_size=9, stride=1)
        self.in1 = nn.InstanceNorm2d(16, affine=True)
        self.conv2 = ConvLayer(16, 32, kernel_size=3, stride=2)
        self.in2 = nn.InstanceNorm2d(32, affine=True)
        self.res1 = ResidualBlock(32)
        self.res2 = ResidualBlock(32)
        self.deconv1 = UpsampleConvLayer(32, 16, kernel_size=3, stride=1, upsample=2)
        self.in4 = nn.InstanceNorm2d(16, affine=True)
        self.deconv3 = ConvLayer(16, 3, kernel_size=9, stride=1)
        self.relu = nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in4(self.deconv1(y)))
        return self.deconv3(y)


class Vgg16(nn.Module):
    def __init__(self, requires_grad=False):
        super().__init__()
        self.slice1 = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.slice2 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.slice3 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(32, 48, 3, padding=1), nn.ReLU())
        self.slice4 = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(48, 64, 3, padding=1), nn.ReLU())
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        h = self.slice3(h)
        h_relu3_3 = h
        h = self.slice4(h)
        h_relu4_3 = h
        vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])
        return vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    gram = features.bmm(features_t) / (ch * h * w)
    return gram


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def train():
    train_dataset = SceneDataset(384, seed=0)
    train_loader = DataLoader(train_dataset, batch_size=batch_size, shuffle=True)

    transformer = TransformerNet().to(device)
    optimizer = Adam(transformer.parameters(), lr)
    mse_loss = torch.nn.MSELoss()

    vgg = Vgg16(requires_grad=False).to(device)
    style = style_image().repeat(batch_size, 1, 1, 1).to(device)

    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    for e in range(epochs):
        transformer.train()
        agg_content_loss = 0.
        agg_style_loss = 0.
        count = 0
        for batch_id, (x, _) in enumerate(train_loader):
            n_batch = len(x)
            count += n_batch
            optimizer.zero_grad()

            x = x.to(device)
            y = transformer(x)

            y = normalize_batch(y)
            x = normalize_batch(x)

            features_y = vgg(y)
            features_x = vgg(x)

            content_loss = content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)

            style_loss = 0.
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= style_weight

            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()

            agg_content_loss += content_loss.item()
            agg_style_loss += style_loss.item()

            if (batch_id + 1) % log_interval == 0:
                mesg = "Epoch {}:\t[{}/{}]\tcontent: {:.2f}\tstyle: {:.2f}\ttotal: {:.2f}".format(
                    e + 1, count, len(train_dataset),
                    agg_content_loss / (batch_id + 1),
                    agg_style_loss / (batch_id + 1),
                    (agg_content_loss + agg_style_loss) / (batch_id + 1)
                )
                print(mesg)

    transformer.eval()
    with torch.no_grad():
        x = train_dataset.x[:16].clone()
        out = transformer(x).clamp(0, 255)
        fy = vgg(normalize_batch(out.clone()))
        fx = vgg(normalize_batch(x.clone()))
        s = sum(F.mse_loss(gram_matrix(a), g[:1].expand(16, -1, -1)) for a, g in zip(fy, gram_style)).item()
        s0 = sum(F.mse_loss(gram_matrix(a), g[:1].expand(16, -1, -1)) for a, g in zip(fx, gram_style)).item()
        c = F.mse_loss(fy.relu2_2, fx.relu2_2).item()
    print("eval: style gram distance of stylized {:.3e} vs content images {:.3e}, content feature mse {:.3f}".format(s, s0, c))


if __name__ == "__main__":
    train()
