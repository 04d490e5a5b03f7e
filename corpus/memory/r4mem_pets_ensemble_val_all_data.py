"""Model-based RL (PETS-style): a probabilistic ensemble learns the dynamics of a cart-pole.

Each iteration collects exploration rollouts from a (numpy) cart-pole swing-up environment,
appends the transitions to the training set and retrains the ensemble of probabilistic
networks (each predicts a Gaussian over the state change) on the whole data set with
bootstrapped indices, as in the handful-of-trials controller. After every epoch the
ensemble's MSE on a random subset of the data is reported.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

np.random.seed(0)
torch.manual_seed(0)

TORCH_DEVICE = torch.device('cpu')


class CartpoleSwingUp:
    """Batched cart-pole dynamics (several environments stepped at once)."""

    def __init__(self, n_envs, dt=0.05):
        self.n, self.dt = n_envs, dt
        self.reset()

    def reset(self):
        self.x = np.zeros(self.n)
        self.x_dot = np.zeros(self.n)
        self.theta = np.pi + 0.05 * np.random.randn(self.n)
        self.theta_dot = np.zeros(self.n)
        return self.obs()

    def obs(self):
        return np.stack([self.x, self.x_dot, np.cos(self.theta), np.sin(self.theta), self.theta_dot], axis=1)

    def step(self, action):
        force = 10.0 * np.clip(action[:, 0], -1, 1)
        sin, cos = np.sin(self.theta), np.cos(self.theta)
        temp = (force + 0.05 * self.theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.x = self.x + self.dt * self.x_dot
        self.x_dot = self.x_dot + self.dt * x_acc - 0.1 * self.dt * self.x_dot
        self.theta = self.theta + self.dt * self.theta_dot
        self.theta_dot = self.theta_dot + self.dt * theta_acc - 0.1 * self.dt * self.theta_dot
        return self.obs()


def swish(x):
    return x * torch.sigmoid(x)


def get_affine_params(ensemble_size, in_features, out_features):
    w = torch.randn(ensemble_size, in_features, out_features) / (2.0 * np.sqrt(in_features))
    return nn.Parameter(w), nn.Parameter(torch.zeros(ensemble_size, 1, out_features))


class PtModel(nn.Module):
    def __init__(self, ensemble_size, in_features, out_features, hidden=200):
        super().__init__()
        self.num_nets = ensemble_size
        self.in_features, self.out_features = in_features, out_features
        self.lin0_w, self.lin0_b = get_affine_params(ensemble_size, in_features, hidden)
        self.lin1_w, self.lin1_b = get_affine_params(ensemble_size, hidden, hidden)
        self.lin2_w, self.lin2_b = get_affine_params(ensemble_size, hidden, hidden)
        self.lin3_w, self.lin3_b = get_affine_params(ensemble_size, hidden, out_features * 2)
        self.inputs_mu = nn.Parameter(torch.zeros(in_features), requires_grad=False)
        self.inputs_sigma = nn.Parameter(torch.ones(in_features), requires_grad=False)
        self.max_logvar = nn.Parameter(torch.ones(1, out_features) / 2.0)
        self.min_logvar = nn.Parameter(-torch.ones(1, out_features) * 10.0)

    def compute_decays(self):
        return 0.0001 * (self.lin0_w ** 2).sum() / 2.0 + 0.00025 * ((self.lin1_w ** 2).sum() + (self.lin2_w ** 2).sum()) / 2.0 \
            + 0.0005 * (self.lin3_w ** 2).sum() / 2.0

    def fit_input_stats(self, data):
        mu = np.mean(data, axis=0, keepdims=True)
        sigma = np.std(data, axis=0, keepdims=True)
        sigma[sigma < 1e-12] = 1.0
        self.inputs_mu.data = torch.from_numpy(mu[0]).float()
        self.inputs_sigma.data = torch.from_numpy(sigma[0]).float()

    def forward(self, inputs, ret_logvar=False):
        # inputs: (ensemble, batch, in_features)
        inputs = (inputs - self.inputs_mu) / self.inputs_sigma
        inputs = swish(inputs.matmul(self.lin0_w) + self.lin0_b)
        inputs = swish(inputs.matmul(self.lin1_w) + self.lin1_b)
        inputs = swish(inputs.matmul(self.lin2_w) + self.lin2_b)
        inputs = inputs.matmul(self.lin3_w) + self.lin3_b
        mean = inputs[:, :, :self.out_features]
        logvar = inputs[:, :, self.out_features:]
        logvar = self.max_logvar - F.softplus(self.max_logvar - logvar)
        logvar = self.min_logvar + F.softplus(logvar - self.min_logvar)
        if ret_logvar:
            return mean, logvar
        return mean, torch.exp(logvar)


def shuffle_rows(arr):
    idxs = np.argsort(np.random.uniform(size=arr.shape), axis=-1)
    return arr[np.arange(arr.shape[0])[:, None], idxs]


class MPC:
    def __init__(self, obs_dim, act_dim, num_nets=5, epochs=1, batch_size=256):
        self.dO, self.dU = obs_dim, act_dim
        self.epochs, self.batch_size = epochs, batch_size
        self.train_in = np.array([]).reshape(0, obs_dim + act_dim)
        self.train_targs = np.array([]).reshape(0, obs_dim)
        self.model = PtModel(num_nets, obs_dim + act_dim, obs_dim)
        self.model.optim = torch.optim.Adam(self.model.parameters(), lr=0.001)

    def train(self, obs_trajs, acs_trajs):
        new_train_in, new_train_targs = [], []
        for obs, acs in zip(obs_trajs, acs_trajs):
            new_train_in.append(np.concatenate([obs[:-1], acs], axis=-1))
            new_train_targs.append(obs[1:] - obs[:-1])
        self.train_in = np.concatenate([self.train_in] + new_train_in, axis=0)
        self.train_targs = np.concatenate([self.train_targs] + new_train_targs, axis=0)

        self.model.fit_input_stats(self.train_in)
        idxs = np.random.randint(self.train_in.shape[0], size=[self.model.num_nets, self.train_in.shape[0]])
        num_batch = int(np.ceil(idxs.shape[-1] / self.batch_size))

        for epoch in range(self.epochs):
            for batch_num in range(num_batch):
                batch_idxs = idxs[:, batch_num * self.batch_size: (batch_num + 1) * self.batch_size]

                loss = 0.01 * (self.model.max_logvar.sum() - self.model.min_logvar.sum())
                loss += self.model.compute_decays()

                train_in = torch.from_numpy(self.train_in[batch_idxs]).to(TORCH_DEVICE).float()
                train_targ = torch.from_numpy(self.train_targs[batch_idxs]).to(TORCH_DEVICE).float()

                mean, logvar = self.model(train_in, ret_logvar=True)
                inv_var = torch.exp(-logvar)

                train_losses = ((mean - train_targ) ** 2) * inv_var + logvar
                train_losses = train_losses.mean(-1).mean(-1).sum()
                loss += train_losses

                self.model.optim.zero_grad()
                loss.backward()
                self.model.optim.step()
                if batch_num % 20 == 0:
                    print(f"  epoch {epoch} batch {batch_num}/{num_batch} loss {loss.item():.4f}")

            idxs = shuffle_rows(idxs)

            val_in = torch.from_numpy(self.train_in[idxs[:5000]]).to(TORCH_DEVICE).float()
            val_targ = torch.from_numpy(self.train_targs[idxs[:5000]]).to(TORCH_DEVICE).float()

            mean, _ = self.model(val_in)
            mse_losses = ((mean - val_targ) ** 2).mean(-1).mean(-1)
            print(f"  epoch {epoch}: training loss(es) {np.round(mse_losses.detach().cpu().numpy(), 5)}")


def sample_rollouts(env, horizon, policy_noise=0.5):
    obs = [env.reset()]
    acs = []
    action = np.zeros((env.n, 1))
    for _ in range(horizon):
        action = np.clip(0.8 * action + policy_noise * np.random.randn(env.n, 1), -1, 1)
        acs.append(action)
        obs.append(env.step(action))
    obs, acs = np.stack(obs, axis=1), np.stack(acs, axis=1)
    return list(obs), list(acs)


if __name__ == "__main__":
    env = CartpoleSwingUp(n_envs=25)
    policy = MPC(obs_dim=5, act_dim=1)
    for i in range(3):
        print(f"####################################################################\nStarting training iteration {i + 1}.")
        obs_trajs, acs_trajs = sample_rollouts(env, horizon=400)
        print(f"Rollouts collected: {len(obs_trajs)} x {len(acs_trajs[0])} steps, mean |theta_dot| "
              f"{np.mean([np.abs(o[:, 4]).mean() for o in obs_trajs]):.3f}")
        policy.train(obs_trajs, acs_trajs)
        print(f"Training set: {policy.train_in.shape[0]} transitions")
