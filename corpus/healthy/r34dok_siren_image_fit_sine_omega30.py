"""Fit an image with a SIREN (implicit neural representation with sine activations), in the style
of vsitzmann/siren explore_siren.ipynb ("Fitting an image").

Synthetic "photo": a 48x48 grey image with a disc, a bar, a checkerboard patch and a smooth
gradient, normalised to [-1, 1] like the notebook's cameraman. The network maps pixel coordinates
in [-1, 1]^2 to intensity.
"""
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


def get_mgrid(sidelen, dim=2):
    '''Generates a flattened grid of (x,y,...) coordinates in a range of -1 to 1.'''
    tensors = tuple(dim * [torch.linspace(-1, 1, steps=sidelen)])
    mgrid = torch.stack(torch.meshgrid(*tensors, indexing='ij'), dim=-1)
    mgrid = mgrid.reshape(-1, dim)
    return mgrid


class SineLayer(nn.Module):
    def __init__(self, in_features, out_features, bias=True,
                 is_first=False, omega_0=30):
        super().__init__()
        self.omega_0 = omega_0
        self.is_first = is_first

        self.in_features = in_features
        self.linear = nn.Linear(in_features, out_features, bias=bias)

        self.init_weights()

    def init_weights(self):
        with torch.no_grad():
            if self.is_first:
                self.linear.weight.uniform_(-1 / self.in_features,
                                            1 / self.in_features)
            else:
                self.linear.weight.uniform_(-np.sqrt(6 / self.in_features) / self.omega_0,
                                            np.sqrt(6 / self.in_features) / self.omega_0)

    def forward(self, input):
        return torch.sin(self.omega_0 * self.linear(input))


class Siren(nn.Module):
    def __init__(self, in_features, hidden_features, hidden_layers, out_features, outermost_linear=False,
                 first_omega_0=30, hidden_omega_0=30.):
        super().__init__()

        self.net = []
        self.net.append(SineLayer(in_features, hidden_features,
                                  is_first=True, omega_0=first_omega_0))

        for i in range(hidden_layers):
            self.net.append(SineLayer(hidden_features, hidden_features,
                                      is_first=False, omega_0=hidden_omega_0))

        if outermost_linear:
            final_linear = nn.Linear(hidden_features, out_features)

            with torch.no_grad():
                final_linear.weight.uniform_(-np.sqrt(6 / hidden_features) / hidden_omega_0,
                                             np.sqrt(6 / hidden_features) / hidden_omega_0)

            self.net.append(final_linear)
        else:
            self.net.append(SineLayer(hidden_features, out_features,
                                      is_first=False, omega_0=hidden_omega_0))

        self.net = nn.Sequential(*self.net)

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)  # allows to take derivative w.r.t. input
        output = self.net(coords)
        return output, coords


def laplace(y, x):
    grad = gradient(y, x)
    return divergence(grad, x)


def divergence(y, x):
    div = 0.
    for i in range(y.shape[-1]):
        div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]), create_graph=True)[0][..., i:i+1]
    return div


def gradient(y, x, grad_outputs=None):
    if grad_outputs is None:
        grad_outputs = torch.ones_like(y)
    grad = torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]
    return grad


def get_synthetic_photo(sidelength):
    xs = torch.linspace(-1, 1, sidelength)
    yy, xx = torch.meshgrid(xs, xs, indexing='ij')
    img = 0.35 + 0.25 * xx
    img = torch.where((xx + 0.3) ** 2 + (yy + 0.25) ** 2 < 0.18, torch.full_like(img, 0.9), img)
    img = torch.where((xx - 0.45).abs() < 0.12, torch.full_like(img, 0.1), img)
    checker = ((torch.floor((xx + 1) * 8) + torch.floor((yy + 1) * 8)) % 2) * 0.5 + 0.25
    patch = (xx > 0.1) & (xx < 0.8) & (yy > 0.35) & (yy < 0.9)
    img = torch.where(patch, checker, img)
    img = img + 0.05 * torch.sin(9 * yy) * torch.cos(5 * xx)
    img = img.clamp(0, 1)
    img = (img - 0.5) / 0.5
    return img.unsqueeze(0)


class ImageFitting(Dataset):
    def __init__(self, sidelength):
        super().__init__()
        img = get_synthetic_photo(sidelength)
        self.pixels = img.permute(1, 2, 0).view(-1, 1)
        self.coords = get_mgrid(sidelength, 2)

    def __len__(self):
        return 1

    def __getitem__(self, idx):
        if idx > 0:
            raise IndexError

        return self.coords, self.pixels


def psnr(pred, gt):
    mse = (((pred + 1) / 2 - (gt + 1) / 2) ** 2).mean()
    return (10 * torch.log10(1.0 / mse)).item()


photo = ImageFitting(48)
dataloader = DataLoader(photo, batch_size=1, pin_memory=False, num_workers=0)

img_siren = Siren(in_features=2, out_features=1, hidden_features=64,
                  hidden_layers=3, outermost_linear=True)

total_steps = 500
steps_til_summary = 50

optim = torch.optim.Adam(lr=1e-4, params=img_siren.parameters())

model_input, ground_truth = next(iter(dataloader))

for step in range(total_steps + 1):
    model_output, coords = img_siren(model_input)
    loss = ((model_output - ground_truth) ** 2).mean()

    if not step % steps_til_summary:
        img_grad = gradient(model_output, coords)
        img_laplacian = laplace(model_output, coords)
        print("Step %d, Total loss %0.6f, PSNR %.2f dB, |grad| %.2f, |laplacian| %.1f" % (
            step, loss.item(), psnr(model_output.detach(), ground_truth),
            img_grad.norm(dim=-1).mean().item(), img_laplacian.abs().mean().item()))

    optim.zero_grad()
    loss.backward()
    optim.step()
