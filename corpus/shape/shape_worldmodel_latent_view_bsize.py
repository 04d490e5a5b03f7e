"""World-models style training: a VAE compresses frames to latents, then an MDRNN-like
recurrent model learns to predict the next latent, the reward and the terminal flag
from (latent, action) sequences.

Rollouts are simulated: a small hidden state is driven by the actions and rendered
into 3x16x16 frames; the reward depends on the hidden state.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as f
from torch.utils.data import DataLoader, Dataset

# constants
ASIZE = 3
LSIZE = 8
RSIZE = 32
SIZE = 16
BSIZE = 16
SEQ_LEN = 8

torch.manual_seed(0)


class RolloutSequenceDataset(Dataset):
    """(obs, action, reward, terminal, next_obs) subsequences of SEQ_LEN steps."""

    def __init__(self, n_seq, seq_len, seed=0):
        g = torch.Generator().manual_seed(seed)
        render = torch.randn(4, 3 * SIZE * SIZE, generator=g) / 2.0
        state = torch.randn(n_seq, 4, generator=g)
        actions = torch.randn(n_seq, seq_len + 1, ASIZE, generator=g)
        drive = torch.randn(ASIZE, 4, generator=g) / 2.0
        states = []
        for t in range(seq_len + 1):
            state = 0.9 * state + actions[:, t] @ drive
            states.append(state)
        states = torch.stack(states, 1)
        frames = torch.sigmoid(states @ render).view(n_seq, seq_len + 1, 3, SIZE, SIZE)
        self.obs = frames[:, :-1]
        self.next_obs = frames[:, 1:]
        self.action = actions[:, :-1]
        self.reward = states[:, 1:, 0] - 0.5 * states[:, 1:, 1]
        self.terminal = torch.zeros(n_seq, seq_len)

    def __len__(self):
        return self.obs.size(0)

    def __getitem__(self, i):
        return self.obs[i], self.action[i], self.reward[i], self.terminal[i], self.next_obs[i]


class VAE(nn.Module):
    def __init__(self, img_channels, latent_size):
        super().__init__()
        self.enc = nn.Sequential(
            nn.Conv2d(img_channels, 16, 4, 2, 1), nn.ReLU(),
            nn.Conv2d(16, 32, 4, 2, 1), nn.ReLU(), nn.Flatten())
        self.fc_mu = nn.Linear(32 * 4 * 4, latent_size)
        self.fc_logsigma = nn.Linear(32 * 4 * 4, latent_size)
        self.dec = nn.Sequential(
            nn.Linear(latent_size, 32 * 4 * 4), nn.ReLU(), nn.Unflatten(1, (32, 4, 4)),
            nn.ConvTranspose2d(32, 16, 4, 2, 1), nn.ReLU(),
            nn.ConvTranspose2d(16, img_channels, 4, 2, 1), nn.Sigmoid())

    def forward(self, x):
        h = self.enc(x)
        mu, logsigma = self.fc_mu(h), self.fc_logsigma(h)
        z = mu + logsigma.exp() * torch.randn_like(mu)
        return self.dec(z), mu, logsigma


class MDRNN(nn.Module):
    def __init__(self, latents, actions, hiddens):
        super().__init__()
        self.rnn = nn.LSTM(latents + actions, hiddens)
        self.mu_head = nn.Linear(hiddens, latents)
        self.reward_head = nn.Linear(hiddens, 1)
        self.done_head = nn.Linear(hiddens, 1)

    def forward(self, actions, latents):
        outs, _ = self.rnn(torch.cat([actions, latents], dim=-1))
        return self.mu_head(outs), self.reward_head(outs).squeeze(-1), self.done_head(outs).squeeze(-1)


parser = argparse.ArgumentParser("MDRNN training")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--vae-steps", type=int, default=30)
args = parser.parse_args()

train_set = RolloutSequenceDataset(107, SEQ_LEN, seed=1)
test_set = RolloutSequenceDataset(48, SEQ_LEN, seed=2)
train_loader = DataLoader(train_set, batch_size=BSIZE, shuffle=True)
test_loader = DataLoader(test_set, batch_size=BSIZE)

# stage 1: VAE on single frames
vae = VAE(3, LSIZE)
vae_opt = torch.optim.Adam(vae.parameters(), lr=3e-3)
frames = train_set.obs.reshape(-1, 3, SIZE, SIZE)
for step in range(args.vae_steps):
    idx = torch.randint(0, frames.size(0), (32,))
    recon, mu, logsigma = vae(frames[idx])
    bce = f.mse_loss(recon, frames[idx], reduction="sum") / 32
    kld = -0.5 * torch.sum(1 + 2 * logsigma - mu.pow(2) - (2 * logsigma).exp()) / 32
    vae_opt.zero_grad()
    (bce + kld).backward()
    vae_opt.step()
    if step % 20 == 0:
        print(f"vae step {step} recon {bce.item():.3f} kld {kld.item():.3f}")
vae.eval()

# stage 2: MDRNN on latent sequences
mdrnn = MDRNN(LSIZE, ASIZE, RSIZE)
optimizer = torch.optim.RMSprop(mdrnn.parameters(), lr=1e-3, alpha=.9)


def to_latent(obs, next_obs):
    """ Transform observations to latent space.

    :args obs: 5D torch tensor (BSIZE, SEQ_LEN, ASIZE, SIZE, SIZE)
    :args next_obs: 5D torch tensor (BSIZE, SEQ_LEN, ASIZE, SIZE, SIZE)

    :returns: (latent_obs, latent_next_obs)
        - latent_obs: 4D torch tensor (BSIZE, SEQ_LEN, LSIZE)
        - next_latent_obs: 4D torch tensor (BSIZE, SEQ_LEN, LSIZE)
    """
    with torch.no_grad():
        obs, next_obs = [x.view(-1, 3, SIZE, SIZE) for x in (obs, next_obs)]

        (obs_mu, obs_logsigma), (next_obs_mu, next_obs_logsigma) = [
            vae(x)[1:] for x in (obs, next_obs)]

        latent_obs, latent_next_obs = [
            (x_mu + x_logsigma.exp() * torch.randn_like(x_mu)).view(BSIZE, SEQ_LEN, LSIZE)
            for x_mu, x_logsigma in
            [(obs_mu, obs_logsigma), (next_obs_mu, next_obs_logsigma)]]
    return latent_obs, latent_next_obs


def get_loss(latent_obs, action, reward, terminal, latent_next_obs):
    latent_obs, action, reward, terminal, latent_next_obs = [
        arr.transpose(1, 0) for arr in [latent_obs, action, reward, terminal, latent_next_obs]]
    mus, rs, ds = mdrnn(action, latent_obs)
    gmm = f.mse_loss(mus, latent_next_obs)
    bce = f.binary_cross_entropy_with_logits(ds, terminal)
    mse = f.mse_loss(rs, reward)
    loss = (gmm + bce + mse) / (LSIZE + 2)
    return dict(gmm=gmm, bce=bce, mse=mse, loss=loss)


def data_pass(epoch, train):
    loader = train_loader if train else test_loader
    mdrnn.train(train)
    cum_loss = 0
    for i, data in enumerate(loader):
        obs, action, reward, terminal, next_obs = data

        # transform obs
        latent_obs, latent_next_obs = to_latent(obs, next_obs)

        if train:
            losses = get_loss(latent_obs, action, reward, terminal, latent_next_obs)
            optimizer.zero_grad()
            losses['loss'].backward()
            optimizer.step()
        else:
            with torch.no_grad():
                losses = get_loss(latent_obs, action, reward, terminal, latent_next_obs)
        cum_loss += losses['loss'].item()
        print("Epoch {} {} batch {}: loss={:.5f} gmm={:.5f} mse={:.5f}".format(
            epoch, "train" if train else "test", i, cum_loss / (i + 1),
            losses['gmm'].item(), losses['mse'].item()))
    return cum_loss / (i + 1)


for e in range(args.epochs):
    data_pass(e, train=True)
    test_loss = data_pass(e, train=False)
    print(f"epoch {e} test loss {test_loss:.5f}")
