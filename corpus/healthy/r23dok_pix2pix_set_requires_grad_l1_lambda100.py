"""pix2pix (conditional GAN, image-to-image) on a toy paired data set, after
junyanz/pytorch-CycleGAN-and-pix2pix models/pix2pix_model.py and train.py.

A: a 1x16x16 edge map of a random rectangle; B: the filled rectangle in a colour that
depends on its aspect ratio (3 channels). G is a tiny U-Net with BatchNorm and dropout,
D a PatchGAN on cat(A, B). One iteration, as optimize_parameters does it: D is updated on
real pairs and detached fake pairs, then set_requires_grad(netD, False) freezes D while G
is updated on GAN loss + lambda_L1 (100) * L1. Adam(2e-4, beta1 0.5) for both, a linear
lr decay over the second half (the repo's 'linear' policy).
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class AlignedToyDataset(Dataset):
    def __init__(self, n, size=16, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.A = torch.full((n, 1, size, size), -1.0)
        self.B = torch.full((n, 3, size, size), -1.0)
        palette = torch.tensor([[1.0, -0.6, -0.6], [-0.6, 1.0, -0.6], [-0.6, -0.6, 1.0]])
        for i in range(n):
            h, w = torch.randint(4, 12, (2,), generator=g).tolist()
            y = torch.randint(0, size - h + 1, (1,), generator=g).item()
            x = torch.randint(0, size - w + 1, (1,), generator=g).item()
            self.A[i, 0, y:y + h, x] = 1.0
            self.A[i, 0, y:y + h, x + w - 1] = 1.0
            self.A[i, 0, y, x:x + w] = 1.0
            self.A[i, 0, y + h - 1, x:x + w] = 1.0
            colour = palette[0 if h > w + 1 else (1 if w > h + 1 else 2)]
            self.B[i, :, y:y + h, x:x + w] = colour.view(3, 1, 1)

    def __len__(self):
        return len(self.A)

    def __getitem__(self, idx):
        return {"A": self.A[idx], "B": self.B[idx]}


class UnetGenerator(nn.Module):
    def __init__(self, input_nc=1, output_nc=3, ngf=16):
        super().__init__()
        self.down1 = nn.Conv2d(input_nc, ngf, 4, 2, 1)
        self.down2 = nn.Sequential(nn.LeakyReLU(0.2, True), nn.Conv2d(ngf, ngf * 2, 4, 2, 1), nn.BatchNorm2d(ngf * 2))
        self.down3 = nn.Sequential(nn.LeakyReLU(0.2, True), nn.Conv2d(ngf * 2, ngf * 4, 4, 2, 1))
        self.up3 = nn.Sequential(nn.ReLU(True), nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1), nn.BatchNorm2d(ngf * 2), nn.Dropout(0.5))
        self.up2 = nn.Sequential(nn.ReLU(True), nn.ConvTranspose2d(ngf * 4, ngf, 4, 2, 1), nn.BatchNorm2d(ngf))
        self.up1 = nn.Sequential(nn.ReLU(True), nn.ConvTranspose2d(ngf * 2, output_nc, 4, 2, 1), nn.Tanh())

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(d1)
        d3 = self.down3(d2)
        u3 = self.up3(d3)
        u2 = self.up2(torch.cat([u3, d2], 1))
        return self.up1(torch.cat([u2, d1], 1))


class NLayerDiscriminator(nn.Module):
    def __init__(self, input_nc=4, ndf=16):
        super().__init__()
        self.model = nn.Sequential(
            nn.Conv2d(input_nc, ndf, 4, 2, 1), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, 3, 1, 1),
        )

    def forward(self, x):
        return self.model(x)


def init_weights(net, init_gain=0.02):
    def init_func(m):
        classname = m.__class__.__name__
        if hasattr(m, "weight") and ("Conv" in classname):
            nn.init.normal_(m.weight.data, 0.0, init_gain)
            if m.bias is not None:
                nn.init.constant_(m.bias.data, 0.0)
        elif "BatchNorm2d" in classname:
            nn.init.normal_(m.weight.data, 1.0, init_gain)
            nn.init.constant_(m.bias.data, 0.0)
    net.apply(init_func)
    return net


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("real_label", torch.tensor(1.0))
        self.register_buffer("fake_label", torch.tensor(0.0))
        self.loss = nn.BCEWithLogitsLoss()

    def __call__(self, prediction, target_is_real):
        target = self.real_label if target_is_real else self.fake_label
        return self.loss(prediction, target.expand_as(prediction))


class Pix2PixModel:
    def __init__(self, lr=2e-4, beta1=0.5, lambda_L1=100.0):
        self.netG = init_weights(UnetGenerator())
        self.netD = init_weights(NLayerDiscriminator())
        self.criterionGAN = GANLoss()
        self.criterionL1 = nn.L1Loss()
        self.lambda_L1 = lambda_L1
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=lr, betas=(beta1, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=lr, betas=(beta1, 0.999))
        self.optimizers = [self.optimizer_G, self.optimizer_D]

    def set_input(self, data):
        self.real_A = data["A"]
        self.real_B = data["B"]

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = self.criterionGAN(pred_fake, False)
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = self.criterionGAN(pred_real, True)
        self.loss_D = (self.loss_D_fake + self.loss_D_real) * 0.5
        self.loss_D.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB)
        self.loss_G_GAN = self.criterionGAN(pred_fake, True)
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


def main():
    train_set = AlignedToyDataset(640, seed=1)
    test_set = AlignedToyDataset(128, seed=2)
    loader = DataLoader(train_set, batch_size=16, shuffle=True)
    model = Pix2PixModel()
    n_epochs, n_epochs_decay = 2, 2
    schedulers = [
        torch.optim.lr_scheduler.LambdaLR(
            opt, lr_lambda=lambda e: 1.0 - max(0, e + 1 - n_epochs) / float(n_epochs_decay + 1)
        )
        for opt in model.optimizers
    ]
    total_iters = 0
    for epoch in range(1, n_epochs + n_epochs_decay + 1):
        model.netG.train()
        for data in loader:
            model.set_input(data)
            model.optimize_parameters()
            total_iters += 1
            if total_iters % 10 == 0:
                print(
                    f"(epoch: {epoch}, iters: {total_iters}) G_GAN: {model.loss_G_GAN.item():.3f} "
                    f"G_L1: {model.loss_G_L1.item():.3f} D_real: {model.loss_D_real.item():.3f} "
                    f"D_fake: {model.loss_D_fake.item():.3f}"
                )
        for s in schedulers:
            s.step()
        model.netG.eval()
        with torch.no_grad():
            fake = model.netG(test_set.A)
            test_l1 = (fake - test_set.B).abs().mean().item()
        print(f"End of epoch {epoch} / {n_epochs + n_epochs_decay}  lr {model.optimizer_G.param_groups[0]['lr']:.6f}  test L1 {test_l1:.4f}")


if __name__ == "__main__":
    main()
