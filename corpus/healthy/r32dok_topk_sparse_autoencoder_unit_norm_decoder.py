"""Top-K sparse autoencoder on (synthetic) model activations, after openai/sparse_autoencoder train.py:

    latents = relu(topk(encoder(x - pre_bias) + latent_bias))
    recons  = decoder(latents) + pre_bias

with tied init, unit-norm decoder columns (re-normalised after every backward, and the gradient component
parallel to each column projected out), an AuxK loss that reconstructs the residual from dead latents,
and Adam with a tiny eps. Plain dense PyTorch instead of the Triton sparse kernels.

The activations are sparse mixtures of 96 hidden feature directions in a 32-d space.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

D_MODEL, N_FEATURES, N_DIRS = 32, 96, 192


def make_activations(n, g):
    dirs = F.normalize(torch.randn(N_FEATURES, D_MODEL, generator=g), dim=1)
    active = torch.rand(n, N_FEATURES, generator=g) < 4.0 / N_FEATURES
    mags = torch.empty(n, N_FEATURES).exponential_(1.0, generator=g) * active
    offset = 0.5 * torch.randn(D_MODEL, generator=g)
    return mags @ dirs + offset + 0.02 * torch.randn(n, D_MODEL, generator=g)


class Autoencoder(nn.Module):
    def __init__(self, n_dirs, d_model, k, auxk, dead_steps_threshold):
        super().__init__()
        self.n_dirs = n_dirs
        self.d_model = d_model
        self.k = k
        self.auxk = auxk
        self.dead_steps_threshold = dead_steps_threshold

        self.encoder = nn.Linear(d_model, n_dirs, bias=False)
        self.decoder = nn.Linear(n_dirs, d_model, bias=False)
        self.pre_bias = nn.Parameter(torch.zeros(d_model))
        self.latent_bias = nn.Parameter(torch.zeros(n_dirs))
        self.register_buffer("stats_last_nonzero", torch.zeros(n_dirs, dtype=torch.long))

        # "tied" init
        self.decoder.weight.data = self.encoder.weight.data.T.clone()
        unit_norm_decoder_(self)

    def decode_sparse(self, inds, vals):
        latents = torch.zeros(inds.shape[0], self.n_dirs, dtype=vals.dtype).scatter(-1, inds, vals)
        return self.decoder(latents) + self.pre_bias

    def forward(self, x):
        latents_pre_act = F.linear(x - self.pre_bias, self.encoder.weight, self.latent_bias)
        topk = torch.topk(latents_pre_act, k=self.k, dim=-1)
        inds, vals = topk.indices, torch.relu(topk.values)

        with torch.no_grad():
            tmp = torch.zeros_like(self.stats_last_nonzero)
            tmp.scatter_add_(0, inds.reshape(-1), (vals > 1e-3).to(tmp.dtype).reshape(-1))
            self.stats_last_nonzero *= 1 - tmp.clamp(max=1)
            self.stats_last_nonzero += 1

        dead_mask = self.stats_last_nonzero > self.dead_steps_threshold
        auxk = torch.topk(latents_pre_act * dead_mask, k=self.auxk, dim=-1)
        recons = self.decode_sparse(inds, vals)
        return recons, {"auxk_inds": auxk.indices, "auxk_vals": torch.relu(auxk.values), "inds": inds}


def unit_norm_decoder_(autoencoder):
    autoencoder.decoder.weight.data /= autoencoder.decoder.weight.data.norm(dim=0)


def unit_norm_decoder_grad_adjustment_(autoencoder):
    """project out gradient information parallel to the dictionary vectors"""
    assert autoencoder.decoder.weight.grad is not None
    w, g = autoencoder.decoder.weight.data, autoencoder.decoder.weight.grad
    g.sub_(torch.einsum("bn,bn->n", w, g) * w)


def mse(output, target):
    return ((output - target) ** 2).mean()


def normalized_mse(recon, xs):
    xs_mu = xs.mean(dim=0)
    return mse(recon, xs) / mse(xs_mu[None, :].broadcast_to(xs.shape), xs)


def geometric_median(points, iters=50):
    median = points.mean(0)
    for _ in range(iters):
        w = 1.0 / (points - median).norm(dim=1).clamp(min=1e-8)
        median = (w[:, None] * points).sum(0) / w.sum()
    return median


def init_from_data_(ae, stats_acts_sample):
    ae.pre_bias.data = geometric_median(stats_acts_sample)
    with torch.no_grad():
        x = torch.randn(256, ae.d_model)
        x /= x.norm(dim=-1, keepdim=True)
        x += ae.pre_bias.data
        recons, _ = ae(x)
        recons_norm = (recons - ae.pre_bias.data).norm(dim=-1).mean()
        ae.encoder.weight.data /= recons_norm.item()
        ae.stats_last_nonzero.zero_()


@torch.no_grad()
def evaluate(ae, x):
    recons, info = ae(x)
    used = torch.zeros(ae.n_dirs, dtype=torch.bool)
    used[info["inds"].reshape(-1)] = True
    return normalized_mse(recons, x).item(), used.float().mean().item()


def main():
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    acts = make_activations(10240, g)
    train_acts, val_acts = acts[:8192], acts[8192:]
    loader = DataLoader(TensorDataset(train_acts), batch_size=256, shuffle=True, drop_last=True)

    k, auxk, auxk_coef, lr, eps = 6, 32, 1 / 32, 4e-3, 6.25e-10
    ae = Autoencoder(N_DIRS, D_MODEL, k=k, auxk=auxk, dead_steps_threshold=25)
    init_from_data_(ae, train_acts[:4096])
    mse_scale = 1 / ((train_acts.mean(dim=0) - train_acts) ** 2).mean().item()
    opt = torch.optim.Adam(ae.parameters(), lr=lr, eps=eps)

    fvu, alive = evaluate(ae, val_acts)
    print(f"init  val normalized mse {fvu:.4f}  latents ever used {alive:.2f}  (k={k} of {N_DIRS})")
    step = 0
    for epoch in range(1, 7):
        for (x,) in loader:
            recons, info = ae(x)
            recon_loss = mse_scale * mse(recons, x)
            auxk_loss = auxk_coef * normalized_mse(
                ae.decode_sparse(info["auxk_inds"], info["auxk_vals"]),
                x - recons.detach() + ae.pre_bias.detach(),
            ).nan_to_num(0)
            loss = recon_loss + auxk_loss

            opt.zero_grad()
            loss.backward()
            unit_norm_decoder_(ae)
            unit_norm_decoder_grad_adjustment_(ae)
            opt.step()
            step += 1
        dead = (ae.stats_last_nonzero > ae.dead_steps_threshold).float().mean().item()
        fvu, alive = evaluate(ae, val_acts)
        print(f"epoch {epoch}  step {step}  loss {loss.item():.4f}  auxk {auxk_loss.item():.4f}  "
              f"dead {dead:.2f}  val normalized mse {fvu:.4f}  latents used on val {alive:.2f}")


if __name__ == "__main__":
    main()
