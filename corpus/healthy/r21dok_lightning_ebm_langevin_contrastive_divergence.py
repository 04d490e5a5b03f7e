"""Deep energy-based generative model trained with contrastive divergence, after the UvA-DL
tutorial 8 'Deep Energy-Based Generative Models' (Lightning), on synthetic 16x16 glyph images
(rings, crosses and bars in [-1, 1]) instead of MNIST.

The CNN outputs -E(x). Fake images come from a replay buffer (95% old samples, 5% fresh
uniform noise) refined by Langevin dynamics on the input; the loss is
alpha * (real^2 + fake^2) + mean(fake) - mean(real). Validation compares the scores of unseen
glyphs with uniform noise, and an epoch-end callback checks how well the energy separates real
glyphs from pixel-shuffled copies of them (AUROC).
"""
import random
import warnings

import numpy as np
import pytorch_lightning as pl
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data as data
from pytorch_lightning.callbacks import Callback

warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*GPU available but not used.*")

pl.seed_everything(42)
device = torch.device("cpu")


def make_glyphs(n, gen):
    yy, xx = torch.meshgrid(torch.arange(16.0), torch.arange(16.0), indexing="ij")
    imgs = torch.empty(n, 1, 16, 16)
    kinds = torch.randint(0, 3, (n,), generator=gen)
    for i in range(n):
        cy, cx = (torch.rand(2, generator=gen) * 6 + 5).tolist()
        if kinds[i] == 0:
            r = float(torch.rand(1, generator=gen)) * 2 + 3
            img = (((yy - cy) ** 2 + (xx - cx) ** 2).sqrt() - r).abs() < 0.9
        elif kinds[i] == 1:
            img = ((yy - cy).abs() < 1.0) & ((xx - cx).abs() < 5) | ((xx - cx).abs() < 1.0) & ((yy - cy).abs() < 5)
        else:
            img = ((yy - cy).abs() < 1.5) & ((xx - cx).abs() < 6)
        imgs[i, 0] = img.float() * 2 - 1
    return imgs


class CNNModel(nn.Module):
    def __init__(self, hidden_features=32, out_dim=1, **kwargs):
        super().__init__()
        c_hid1 = hidden_features // 2
        c_hid2 = hidden_features
        c_hid3 = hidden_features * 2
        self.cnn_layers = nn.Sequential(
            nn.Conv2d(1, c_hid1, kernel_size=5, stride=2, padding=2),  # [8x8]
            nn.SiLU(),
            nn.Conv2d(c_hid1, c_hid2, kernel_size=3, stride=2, padding=1),  # [4x4]
            nn.SiLU(),
            nn.Conv2d(c_hid2, c_hid3, kernel_size=3, stride=2, padding=1),  # [2x2]
            nn.SiLU(),
            nn.Flatten(),
            nn.Linear(c_hid3 * 4, c_hid3),
            nn.SiLU(),
            nn.Linear(c_hid3, out_dim),
        )

    def forward(self, x):
        x = self.cnn_layers(x).squeeze(dim=-1)
        return x


class Sampler:
    def __init__(self, model, img_shape, sample_size, max_len=8192):
        super().__init__()
        self.model = model
        self.img_shape = img_shape
        self.sample_size = sample_size
        self.max_len = max_len
        self.examples = [(torch.rand((1,) + img_shape) * 2 - 1) for _ in range(self.sample_size)]

    def sample_new_exmps(self, steps=60, step_size=10):
        n_new = np.random.binomial(self.sample_size, 0.05)
        rand_imgs = torch.rand((n_new,) + self.img_shape) * 2 - 1
        old_imgs = torch.cat(random.choices(self.examples, k=self.sample_size - n_new), dim=0)
        inp_imgs = torch.cat([rand_imgs, old_imgs], dim=0).detach().to(device)

        inp_imgs = Sampler.generate_samples(self.model, inp_imgs, steps=steps, step_size=step_size)

        self.examples = list(inp_imgs.to(torch.device("cpu")).chunk(self.sample_size, dim=0)) + self.examples
        self.examples = self.examples[: self.max_len]
        return inp_imgs

    @staticmethod
    def generate_samples(model, inp_imgs, steps=60, step_size=10):
        is_training = model.training
        model.eval()
        for p in model.parameters():
            p.requires_grad = False
        inp_imgs.requires_grad = True

        had_gradients_enabled = torch.is_grad_enabled()
        torch.set_grad_enabled(True)

        noise = torch.randn(inp_imgs.shape, device=inp_imgs.device)
        for _ in range(steps):
            noise.normal_(0, 0.005)
            inp_imgs.data.add_(noise.data)
            inp_imgs.data.clamp_(min=-1.0, max=1.0)

            out_imgs = -model(inp_imgs)
            out_imgs.sum().backward()
            inp_imgs.grad.data.clamp_(-0.03, 0.03)

            inp_imgs.data.add_(-step_size * inp_imgs.grad.data)
            inp_imgs.grad.detach_()
            inp_imgs.grad.zero_()
            inp_imgs.data.clamp_(min=-1.0, max=1.0)

        for p in model.parameters():
            p.requires_grad = True
        model.train(is_training)
        torch.set_grad_enabled(had_gradients_enabled)
        return inp_imgs


class DeepEnergyModel(pl.LightningModule):
    def __init__(self, img_shape, batch_size, alpha=0.1, lr=1e-4, beta1=0.0, **CNN_args):
        super().__init__()
        self.save_hyperparameters()
        self.cnn = CNNModel(**CNN_args)
        self.sampler = Sampler(self.cnn, img_shape=img_shape, sample_size=batch_size)
        self.example_input_array = torch.zeros(1, *img_shape)

    def forward(self, x):
        z = self.cnn(x)
        return z

    def configure_optimizers(self):
        optimizer = optim.Adam(self.parameters(), lr=self.hparams.lr, betas=(self.hparams.beta1, 0.999))
        scheduler = optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.97)
        return [optimizer], [scheduler]

    def training_step(self, batch, batch_idx):
        real_imgs, _ = batch
        small_noise = torch.randn_like(real_imgs) * 0.005
        real_imgs.add_(small_noise).clamp_(min=-1.0, max=1.0)

        fake_imgs = self.sampler.sample_new_exmps(steps=25, step_size=10)

        inp_imgs = torch.cat([real_imgs, fake_imgs], dim=0)
        real_out, fake_out = self.cnn(inp_imgs).chunk(2, dim=0)

        reg_loss = self.hparams.alpha * (real_out ** 2 + fake_out ** 2).mean()
        cdiv_loss = fake_out.mean() - real_out.mean()
        loss = reg_loss + cdiv_loss

        self.log("loss", loss)
        self.log("loss_regularization", reg_loss)
        self.log("loss_contrastive_divergence", cdiv_loss)
        self.log("metrics_avg_real", real_out.mean())
        self.log("metrics_avg_fake", fake_out.mean())
        if batch_idx % 5 == 0:
            print(f"epoch {self.current_epoch} step {self.global_step}: loss {loss.item():.4f} "
                  f"(reg {reg_loss.item():.4f}, cdiv {cdiv_loss.item():.4f}), "
                  f"real {real_out.mean().item():.3f} fake {fake_out.mean().item():.3f}")
        return loss

    def validation_step(self, batch, batch_idx):
        real_imgs, _ = batch
        fake_imgs = torch.rand_like(real_imgs) * 2 - 1

        inp_imgs = torch.cat([real_imgs, fake_imgs], dim=0)
        real_out, fake_out = self.cnn(inp_imgs).chunk(2, dim=0)

        cdiv = fake_out.mean() - real_out.mean()
        self.log("val_contrastive_divergence", cdiv)
        self.log("val_fake_out", fake_out.mean())
        self.log("val_real_out", real_out.mean())


def auroc(pos, neg):
    scores = torch.cat([pos, neg])
    ranks = scores.argsort().argsort().float() + 1
    n_pos, n_neg = len(pos), len(neg)
    return ((ranks[:n_pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


class OutlierCallback(Callback):
    def __init__(self, real_imgs):
        super().__init__()
        self.real_imgs = real_imgs
        g = torch.Generator().manual_seed(7)
        flat = real_imgs.flatten(1)
        perm = torch.stack([torch.randperm(flat.shape[1], generator=g) for _ in range(flat.shape[0])])
        self.shuffled = torch.gather(flat, 1, perm).view_as(real_imgs)

    def report(self, pl_module, tag):
        with torch.no_grad():
            real = pl_module.cnn(self.real_imgs)
            shuf = pl_module.cnn(self.shuffled)
            noise = pl_module.cnn(torch.rand_like(self.real_imgs) * 2 - 1)
        print(f"{tag}: score real {real.mean():.3f}, pixel-shuffled {shuf.mean():.3f}, noise {noise.mean():.3f}, "
              f"AUROC real vs shuffled {auroc(real, shuf):.3f}, real vs noise {auroc(real, noise):.3f}")

    def on_train_start(self, trainer, pl_module):
        self.report(pl_module, "before training")

    def on_validation_epoch_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        m = trainer.callback_metrics
        print(f"epoch {trainer.current_epoch}: val_contrastive_divergence {m['val_contrastive_divergence']:.3f}")
        self.report(pl_module, f"epoch {trainer.current_epoch}")


def train_model(**kwargs):
    gen = torch.Generator().manual_seed(0)
    train_imgs = make_glyphs(1152, gen)
    val_imgs = make_glyphs(256, gen)
    train_set = data.TensorDataset(train_imgs, torch.zeros(len(train_imgs), dtype=torch.long))
    val_set = data.TensorDataset(val_imgs, torch.zeros(len(val_imgs), dtype=torch.long))
    train_loader = data.DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
    val_loader = data.DataLoader(val_set, batch_size=256, shuffle=False)

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=4,
        gradient_clip_val=0.1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[OutlierCallback(val_imgs[:128])],
    )
    model = DeepEnergyModel(**kwargs)
    trainer.fit(model, train_loader, val_loader)
    return model


if __name__ == "__main__":
    model = train_model(img_shape=(1, 16, 16), batch_size=64, lr=1e-4, beta1=0.0)
