"""Beta-VAE with controlled capacity increase (Burgess et al.), loss_type 'B' as in
AntixK/PyTorch-VAE (models/beta_vae.py): loss = recons + gamma * kld_weight * |KL - C|, where the
target capacity C grows linearly from 0 to C_max over Capacity_max_iter iterations.
dSprites is replaced by synthetic 16x16 images of one Gaussian blob with random x, y and size."""
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class Blobs(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.factors = torch.rand(n, 3, generator=g)
        yy, xx = torch.meshgrid(torch.linspace(0, 1, 16), torch.linspace(0, 1, 16), indexing='ij')
        cx = 0.2 + 0.6 * self.factors[:, 0].view(-1, 1, 1)
        cy = 0.2 + 0.6 * self.factors[:, 1].view(-1, 1, 1)
        s = 0.15 + 0.1 * self.factors[:, 2].view(-1, 1, 1)
        self.images = torch.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s ** 2)).view(n, -1)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i]


class BetaVAE(nn.Module):

    num_iter = 0  # Global static variable to keep track of iterations

    def __init__(self, in_dim, latent_dim, hidden_dims=None, beta=4, gamma=1000.,
                 max_capacity=25, Capacity_max_iter=1e5, loss_type='B'):
        super(BetaVAE, self).__init__()
        self.latent_dim = latent_dim
        self.beta = beta
        self.gamma = gamma
        self.loss_type = loss_type
        self.C_max = torch.Tensor([max_capacity])
        self.C_stop_iter = Capacity_max_iter
        if hidden_dims is None:
            hidden_dims = [256, 128]
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden_dims[0]), nn.LeakyReLU(),
                                     nn.Linear(hidden_dims[0], hidden_dims[1]), nn.LeakyReLU())
        self.fc_mu = nn.Linear(hidden_dims[1], latent_dim)
        self.fc_var = nn.Linear(hidden_dims[1], latent_dim)
        self.decoder = nn.Sequential(nn.Linear(latent_dim, hidden_dims[1]), nn.LeakyReLU(),
                                     nn.Linear(hidden_dims[1], hidden_dims[0]), nn.LeakyReLU(),
                                     nn.Linear(hidden_dims[0], in_dim), nn.Sigmoid())

    def encode(self, input):
        result = self.encoder(input)
        return [self.fc_mu(result), self.fc_var(result)]

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, input):
        mu, log_var = self.encode(input)
        z = self.reparameterize(mu, log_var)
        return [self.decoder(z), input, mu, log_var]

    def loss_function(self, *args, **kwargs):
        self.num_iter += 1
        recons = args[0]
        input = args[1]
        mu = args[2]
        log_var = args[3]
        kld_weight = kwargs['M_N']  # Account for the minibatch samples from the dataset

        recons_loss = F.mse_loss(recons, input)

        kld_loss = torch.mean(-0.5 * torch.sum(1 + log_var - mu ** 2 - log_var.exp(), dim=1), dim=0)

        if self.loss_type == 'H':  # https://openreview.net/forum?id=Sy2fzU9gl
            loss = recons_loss + self.beta * kld_weight * kld_loss
        elif self.loss_type == 'B':  # https://arxiv.org/pdf/1804.03599.pdf
            self.C_max = self.C_max.to(input.device)
            C = torch.clamp(self.C_max / self.C_stop_iter * self.num_iter, 0, self.C_max.data[0])
            loss = recons_loss + self.gamma * kld_weight * (kld_loss - C).abs()
        else:
            raise ValueError('Undefined loss type.')

        return {'loss': loss, 'Reconstruction_Loss': recons_loss, 'KLD': kld_loss, 'C': C}


train_set = Blobs(4096, 0)
loader = DataLoader(train_set, batch_size=64, shuffle=True, drop_last=True)
model = BetaVAE(256, 6, gamma=10., max_capacity=8, Capacity_max_iter=500, loss_type='B')
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
M_N = 64 / len(train_set)
print('mean-image baseline recons %.4f' % F.mse_loss(train_set.images.mean(0).expand_as(train_set.images), train_set.images).item())

for epoch in range(10):
    rec, kld, tot, n = 0.0, 0.0, 0.0, 0
    for x in loader:
        out = model(x)
        losses = model.loss_function(*out, M_N=M_N)
        optimizer.zero_grad()
        losses['loss'].backward()
        optimizer.step()
        rec += losses['Reconstruction_Loss'].item()
        kld += losses['KLD'].item()
        tot += losses['loss'].item()
        n += 1
    print('epoch %d  iter %d  loss %.4f  recons %.4f  KLD %.3f  C %.2f' % (
        epoch + 1, model.num_iter, tot / n, rec / n, kld / n, losses['C'].item()))

with torch.no_grad():
    mu, _ = model.encode(train_set.images[:1024])
    f = train_set.factors[:1024]
    corr = torch.corrcoef(torch.cat([mu, f], dim=1).T)[:6, 6:].abs()
    print('max |corr| of a latent with x, y, size:', [round(v, 2) for v in corr.max(0).values.tolist()])
