"""Conditional VAE on small synthetic 'digit' images (port of a VAE/CVAE MNIST example).

Encoder and decoder are MLPs that both take the one-hot label; loss is summed BCE + KLD,
latent size 2, Adam 1e-3. After each epoch we sample one image per class and check that it
looks like that class's template.
"""
import time
from collections import OrderedDict

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

SIDE = 14
N_PIX = SIDE * SIDE


def idx2onehot(idx, n):
    assert torch.max(idx).item() < n
    if idx.dim() == 1:
        idx = idx.unsqueeze(1)
    onehot = torch.zeros(idx.size(0), n)
    onehot.scatter_(1, idx, 1)
    return onehot


def make_templates(n_classes=10):
    g = torch.Generator().manual_seed(123)
    templates = []
    for k in range(n_classes):
        img = torch.zeros(SIDE, SIDE)
        for _ in range(3):
            r0, c0 = torch.randint(0, SIDE - 4, (2,), generator=g).tolist()
            h, w = torch.randint(2, 7, (2,), generator=g).tolist()
            img[r0:r0 + h, c0:c0 + w] = 1.0
        templates.append(img.flatten())
    return torch.stack(templates)


class FakeDigits(Dataset):
    def __init__(self, templates, n=2560, seed=1):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, templates.size(0), (n,), generator=g)
        base = templates[self.y]
        noise = torch.rand(n, N_PIX, generator=g)
        flip = (noise < 0.05).float()
        x = base * (1 - flip) + (1 - base) * flip
        self.x = (x * 0.9 + 0.05 * torch.rand(n, N_PIX, generator=g)).clamp(0, 1)

    def __len__(self):
        return self.x.size(0)

    def __getitem__(self, i):
        return self.x[i].view(1, SIDE, SIDE), self.y[i]


class Encoder(nn.Module):
    def __init__(self, layer_sizes, latent_size, conditional, num_labels):
        super().__init__()
        self.conditional = conditional
        self.num_labels = num_labels
        if self.conditional:
            layer_sizes[0] += num_labels
        self.MLP = nn.Sequential()
        for i, (in_size, out_size) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:])):
            self.MLP.add_module(name="L%i" % (i), module=nn.Linear(in_size, out_size))
            self.MLP.add_module(name="A%i" % (i), module=nn.ReLU())
        self.linear_means = nn.Linear(layer_sizes[-1], latent_size)
        self.linear_log_var = nn.Linear(layer_sizes[-1], latent_size)

    def forward(self, x, c=None):
        if self.conditional:
            c = idx2onehot(c, n=self.num_labels)
            x = torch.cat((x, c), dim=-1)
        x = self.MLP(x)
        means = self.linear_means(x)
        log_vars = self.linear_log_var(x)
        return means, log_vars


class Decoder(nn.Module):
    def __init__(self, layer_sizes, latent_size, conditional, num_labels):
        super().__init__()
        self.conditional = conditional
        self.num_labels = num_labels
        input_size = latent_size + num_labels if conditional else latent_size
        self.MLP = nn.Sequential()
        for i, (in_size, out_size) in enumerate(zip([input_size] + layer_sizes[:-1], layer_sizes)):
            self.MLP.add_module(name="L%i" % (i), module=nn.Linear(in_size, out_size))
            if i + 1 < len(layer_sizes):
                self.MLP.add_module(name="A%i" % (i), module=nn.ReLU())
            else:
                self.MLP.add_module(name="sigmoid", module=nn.Sigmoid())

    def forward(self, z, c):
        if self.conditional:
            c = idx2onehot(c, n=self.num_labels)
            z = torch.cat((z, c), dim=-1)
        return self.MLP(z)


class VAE(nn.Module):
    def __init__(self, encoder_layer_sizes, latent_size, decoder_layer_sizes, conditional=False, num_labels=0):
        super().__init__()
        if conditional:
            assert num_labels > 0
        self.latent_size = latent_size
        self.encoder = Encoder(encoder_layer_sizes, latent_size, conditional, num_labels)
        self.decoder = Decoder(decoder_layer_sizes, latent_size, conditional, num_labels)

    def forward(self, x, c=None):
        batch_size = x.size(0)
        means, log_var = self.encoder(x, c)
        std = torch.exp(0.5 * log_var)
        eps = torch.randn([batch_size, self.latent_size])
        z = eps * std + means
        recon_x = self.decoder(z, c)
        return recon_x, means, log_var, z

    def inference(self, n=1, c=None):
        z = torch.randn([n, self.latent_size])
        return self.decoder(z, c)


def loss_fn(recon_x, x, mean, log_var):
    BCE = torch.nn.functional.binary_cross_entropy(recon_x, x, reduction="sum")
    KLD = -0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp())
    return BCE + KLD


def conditional_sample_accuracy(vae, templates):
    vae.eval()
    with torch.no_grad():
        c = torch.arange(0, 10).long().repeat(20)
        x = vae.inference(n=c.size(0), c=c)
        d = torch.cdist(x, templates)
        acc = (d.argmin(dim=1) == c).float().mean().item()
    vae.train()
    return acc


def main():
    epochs, batch_size, learning_rate, print_every = 5, 64, 1e-3, 10
    templates = make_templates()
    datasets = OrderedDict()
    datasets["train"] = FakeDigits(templates, n=2560, seed=1)

    vae = VAE(encoder_layer_sizes=[N_PIX, 256], latent_size=2,
              decoder_layer_sizes=[256, N_PIX], conditional=True, num_labels=10)
    optimizer = torch.optim.Adam(vae.parameters(), lr=learning_rate)

    print("sample acc before training: %.3f" % conditional_sample_accuracy(vae, templates))
    ts = time.time()
    iteration_start_time = time.time()
    for epoch in range(epochs):
        for split, dataset in datasets.items():
            data_loader = DataLoader(dataset=dataset, batch_size=batch_size, shuffle=split == "train")
            epoch_loss, n_seen = 0.0, 0
            for iteration, (x, y) in enumerate(data_loader):
                x = x.view(-1, N_PIX)
                y = y.view(-1, 1)
                recon_x, mean, log_var, z = vae(x, y)
                loss = loss_fn(recon_x, x, mean, log_var)
                if split == "train":
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                epoch_loss += loss.item()
                n_seen += x.size(0)
                if iteration % print_every == 0 or iteration == len(data_loader) - 1:
                    time_delta = time.time() - iteration_start_time
                    print("Batch %04d/%i, Loss %9.4f, Time %2.3f"
                          % (iteration, len(data_loader) - 1, loss.item() / x.size(0), time_delta))
                    iteration_start_time = time.time()
        acc = conditional_sample_accuracy(vae, templates)
        print("Finished Epoch: %d  mean loss/sample %.3f  conditional sample acc %.3f"
              % (epoch, epoch_loss / n_seen, acc))
    print("Total Time: ", time.time() - ts)


if __name__ == "__main__":
    main()
