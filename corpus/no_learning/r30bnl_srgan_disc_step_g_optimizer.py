"""SRGAN-style x2 super-resolution training: an SRResNet-like generator and a VGG-style
discriminator, pixel (MSE) + adversarial (BCEWithLogits) loss, alternating D and G updates.
Low-/high-resolution patch pairs are generated in the script."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class PatchPairs(Dataset):
    def __init__(self, n, gt_size=16):
        g = torch.Generator().manual_seed(1)
        ys = torch.linspace(0, 1, gt_size).view(1, -1, 1)
        xs = torch.linspace(0, 1, gt_size).view(1, 1, -1)
        freq = torch.rand(n, 1, 1, generator=g) * 6 + 2
        phase = torch.rand(n, 1, 1, generator=g) * 6.28
        angle = torch.rand(n, 1, 1, generator=g) * 3.14
        wave = torch.sin(freq * (xs * torch.cos(angle) + ys * torch.sin(angle)) * 6.28 + phase)
        color = torch.rand(n, 3, 1, 1, generator=g)
        self.gt = (0.5 + 0.5 * wave.unsqueeze(1) * color).clamp(0, 1)
        self.lr = F.avg_pool2d(self.gt, 2)

    def __len__(self):
        return len(self.gt)

    def __getitem__(self, i):
        return {"gt": self.gt[i], "lr": self.lr[i]}


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.rcb = nn.Sequential(nn.Conv2d(channels, channels, 3, 1, 1), nn.PReLU(),
                                 nn.Conv2d(channels, channels, 3, 1, 1))

    def forward(self, x):
        return x + self.rcb(x)


class SRResNet(nn.Module):
    def __init__(self, channels=32, num_rcb=4):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels, 9, 1, 4), nn.PReLU())
        self.trunk = nn.Sequential(*[ResidualBlock(channels) for _ in range(num_rcb)])
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1)
        self.upsampling = nn.Sequential(nn.Conv2d(channels, channels * 4, 3, 1, 1),
                                        nn.PixelShuffle(2), nn.PReLU())
        self.conv3 = nn.Conv2d(channels, 3, 9, 1, 4)

    def forward(self, x):
        out1 = self.conv1(x)
        out = self.trunk(out1)
        out = self.conv2(out) + out1
        out = self.upsampling(out)
        return torch.sigmoid(self.conv3(out))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, 1, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(32, 32, 3, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(32, 64, 3, 1, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(64, 64, 3, 2, 1), nn.LeakyReLU(0.2, True))
        self.classifier = nn.Sequential(nn.Linear(64 * 4 * 4, 128), nn.LeakyReLU(0.2, True),
                                        nn.Linear(128, 1))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def train(g_model, d_model, loader, pixel_criterion, adversarial_criterion,
          g_optimizer, d_optimizer, epoch):
    g_model.train()
    d_model.train()
    for batch_index, batch_data in enumerate(loader):
        gt = batch_data["gt"]
        lr = batch_data["lr"]
        real_label = torch.full([gt.shape[0], 1], 1.0)
        fake_label = torch.full([gt.shape[0], 1], 0.0)

        # Start training the discriminator model
        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = True
        d_model.zero_grad(set_to_none=True)
        sr = g_model(lr)
        gt_output = d_model(gt)
        d_loss_gt = adversarial_criterion(gt_output, real_label)
        d_loss_gt.backward()
        sr_output = d_model(sr.detach().clone())
        d_loss_sr = adversarial_criterion(sr_output, fake_label)
        d_loss_sr.backward()
        d_loss = d_loss_gt + d_loss_sr
        g_optimizer.step()

        # Start training the generator model
        for d_parameters in d_model.parameters():
            d_parameters.requires_grad = False
        g_model.zero_grad(set_to_none=True)
        sr = g_model(lr)
        pixel_loss = 1.0 * pixel_criterion(sr, gt)
        adversarial_loss = 0.001 * adversarial_criterion(d_model(sr), real_label)
        g_loss = pixel_loss + adversarial_loss
        g_loss.backward()
        g_optimizer.step()

        d_gt_probability = torch.sigmoid(gt_output.detach()).mean().item()
        d_sr_probability = torch.sigmoid(sr_output.detach()).mean().item()
        if batch_index % 10 == 0:
            print(f"Epoch: [{epoch + 1}][{batch_index:2d}/{len(loader)}] "
                  f"D Loss {d_loss.item():.4f} G Loss {g_loss.item():.4f} "
                  f"Pixel {pixel_loss.item():.4f} D(GT) {d_gt_probability:.3f} D(SR) {d_sr_probability:.3f}")


def main():
    loader = DataLoader(PatchPairs(1024), batch_size=16, shuffle=True, drop_last=True)
    g_model = SRResNet()
    d_model = Discriminator()
    pixel_criterion = nn.MSELoss()
    adversarial_criterion = nn.BCEWithLogitsLoss()
    g_optimizer = optim.Adam(g_model.parameters(), 1e-4, (0.9, 0.999))
    d_optimizer = optim.Adam(d_model.parameters(), 1e-4, (0.9, 0.999))
    for epoch in range(2):
        train(g_model, d_model, loader, pixel_criterion, adversarial_criterion,
              g_optimizer, d_optimizer, epoch)


if __name__ == "__main__":
    main()
