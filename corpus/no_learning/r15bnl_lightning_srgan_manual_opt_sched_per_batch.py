"""x2 super-resolution GAN (SRResNet generator + patch discriminator) with PyTorch Lightning.

The generator and the discriminator have their own optimizer and StepLR schedule, so the module
uses manual optimization: content (MSE) loss plus a small adversarial term for the generator, and
the usual real/fake BCE for the discriminator.  Synthetic 32x32 high-resolution patches (edges and
blobs) are downsampled 2x to make the low-resolution inputs; the generator predicts the
residual on top of a bicubic upsampling.
"""
import math
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

HR = 32
SCALE = 2


def make_patch(g):
    yy, xx = torch.meshgrid(torch.linspace(-1, 1, HR), torch.linspace(-1, 1, HR), indexing="ij")
    img = 0.2 * torch.rand(1, generator=g) * torch.ones(HR, HR)
    for _ in range(int(torch.randint(2, 5, (1,), generator=g))):
        kind = int(torch.randint(0, 2, (1,), generator=g))
        a = float(torch.rand(1, generator=g)) * math.pi
        c = 2 * torch.rand(2, generator=g) - 1
        amp = 0.3 + 0.7 * float(torch.rand(1, generator=g))
        if kind == 0:
            img += amp * ((xx - c[0]) * math.cos(a) + (yy - c[1]) * math.sin(a) > 0).float()
        else:
            r = 0.2 + 0.4 * float(torch.rand(1, generator=g))
            img += amp * (((xx - c[0]) ** 2 + (yy - c[1]) ** 2) < r ** 2).float()
    img = img / img.max()
    return img.unsqueeze(0)


class SRPatches(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.hr = torch.stack([make_patch(g) for _ in range(n)])
        self.lr = F.avg_pool2d(self.hr, SCALE)

    def __len__(self):
        return len(self.hr)

    def __getitem__(self, i):
        return self.lr[i], self.hr[i]


class ResidualBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch), nn.PReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch))

    def forward(self, x):
        return x + self.body(x)


class Generator(nn.Module):
    def __init__(self, ch=24, n_blocks=3):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(1, ch, 5, padding=2), nn.PReLU())
        self.blocks = nn.Sequential(*[ResidualBlock(ch) for _ in range(n_blocks)])
        self.mid = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.BatchNorm2d(ch))
        self.up = nn.Sequential(nn.Conv2d(ch, ch * SCALE ** 2, 3, padding=1), nn.PixelShuffle(SCALE),
                                nn.PReLU())
        self.tail = nn.Conv2d(ch, 1, 5, padding=2)

    def forward(self, x):
        base = F.interpolate(x, scale_factor=SCALE, mode="bicubic", align_corners=False)
        h = self.head(x)
        h = h + self.mid(self.blocks(h))
        return base + self.tail(self.up(h))


class Discriminator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, ch, 3, padding=1), nn.LeakyReLU(0.2),
            nn.Conv2d(ch, ch, 3, stride=2, padding=1), nn.BatchNorm2d(ch), nn.LeakyReLU(0.2),
            nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.BatchNorm2d(2 * ch), nn.LeakyReLU(0.2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * ch, 1),
        )

    def forward(self, x):
        return self.net(x)


def psnr(sr, hr):
    mse = F.mse_loss(sr.clamp(0, 1), hr, reduction="none").flatten(1).mean(1)
    return (10 * torch.log10(1.0 / mse)).mean()


class SRGAN(pl.LightningModule):
    def __init__(self, lr=1e-3, adv_weight=1e-3, max_epochs=4):
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = Generator()
        self.discriminator = Discriminator()
        self.val_psnr = []

    def forward(self, x):
        return self.generator(x)

    def training_step(self, batch, batch_idx):
        lr_img, hr_img = batch
        opt_g, opt_d = self.optimizers()

        sr_img = self.generator(lr_img)
        real_logits = self.discriminator(hr_img)
        fake_logits = self.discriminator(sr_img.detach())
        d_loss = (F.binary_cross_entropy_with_logits(real_logits, torch.ones_like(real_logits))
                  + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits)))
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()

        content_loss = F.mse_loss(sr_img, hr_img)
        adv_logits = self.discriminator(sr_img)
        adv_loss = F.binary_cross_entropy_with_logits(adv_logits, torch.ones_like(adv_logits))
        g_loss = content_loss + self.hparams.adv_weight * adv_loss
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()

        sch_g, sch_d = self.lr_schedulers()
        sch_g.step()
        sch_d.step()

        if batch_idx % 20 == 0:
            print(f"epoch {self.current_epoch} batch {batch_idx:2d} content {content_loss.item():.5f} adv {adv_loss.item():.3f} "
                  f"d_loss {d_loss.item():.3f} lr_g {opt_g.param_groups[0]['lr']:.2e}")
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        lr_img, hr_img = batch
        sr_img = self.generator(lr_img)
        self.val_psnr.append(psnr(sr_img, hr_img).item())

    def on_validation_epoch_end(self):
        if self.val_psnr:
            print(f"epoch {self.current_epoch} val PSNR {sum(self.val_psnr) / len(self.val_psnr):.2f} dB")
        self.val_psnr = []

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=self.hparams.lr, betas=(0.9, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=self.hparams.lr, betas=(0.9, 0.999))
        step_size = self.hparams.max_epochs // 2
        sch_g = torch.optim.lr_scheduler.StepLR(opt_g, step_size=step_size, gamma=0.1)
        sch_d = torch.optim.lr_scheduler.StepLR(opt_d, step_size=step_size, gamma=0.1)
        return ([opt_g, opt_d],
                [{"scheduler": sch_g, "interval": "epoch"}, {"scheduler": sch_d, "interval": "epoch"}])


def main():
    t0 = time.time()
    train_set = SRPatches(448, seed=1)
    val_set = SRPatches(128, seed=2)
    bicubic = F.interpolate(val_set.lr, scale_factor=SCALE, mode="bicubic", align_corners=False)
    print(f"bicubic baseline val PSNR {psnr(bicubic, val_set.hr):.2f} dB")
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=128)
    max_epochs = 4
    model = SRGAN(max_epochs=max_epochs)
    trainer = pl.Trainer(max_epochs=max_epochs, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, train_loader, val_loader)
    print(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
