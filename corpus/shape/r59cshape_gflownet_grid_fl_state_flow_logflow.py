"""GFlowNet on a 2-D hypergrid (8 x 8 cells) with the "corners" proxy, trained with the
forward-looking (FL-GFN) loss: forward policy MLP, uniform backward policy, state-flow MLP.
Every few iterations the sampler is tested against the true reward distribution (L1 / KL / JSD).
"""
import math
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

config = dict(
    env=dict(n_dim=2, length=8, cell_min=-1.0, cell_max=1.0, reward_min=1e-8),
    proxy=dict(mu=0.75, sigma=0.05),
    policy=dict(n_hid=128, n_layers=2),
    state_flow=dict(n_hid=128, n_layers=2),
    optimizer=dict(lr=2e-3, batch_size=16, n_train_steps=200, clip_grad_norm=0.0),
    random_action_prob=0.1,
    test=dict(period=25, n=2000),
)


class Corners:
    """Energy with a Gaussian bump near every corner of [-1, 1]^n_dim (lower is better)."""

    def __init__(self, n_dim, mu, sigma):
        self.n_dim = n_dim
        self.mu_vec = mu * torch.ones(n_dim)
        cov = sigma * torch.eye(n_dim)
        self.cov_inv = torch.linalg.inv(cov)
        self.mulnormal_norm = 1.0 / ((2 * torch.pi) ** 2 * torch.linalg.det(cov)) ** 0.5

    def __call__(self, states):
        d = torch.abs(states) - self.mu_vec
        return -1.0 * self.mulnormal_norm * torch.exp(-0.5 * ((d @ self.cov_inv) * d).sum(dim=1))


class Grid:
    def __init__(self, n_dim, length, cell_min, cell_max, reward_min, proxy):
        self.n_dim, self.length = n_dim, length
        self.cells = torch.linspace(cell_min, cell_max, length)
        self.reward_min = reward_min
        self.proxy = proxy
        # actions: +1 on one dimension, and eos (last index)
        self.action_space = [tuple(int(i == d) for i in range(n_dim)) for d in range(n_dim)]
        self.action_space.append(tuple(0 for _ in range(n_dim)))
        self.eos = n_dim
        self.policy_input_dim = n_dim * length
        self.policy_output_dim = len(self.action_space)
        self.max_traj_length = n_dim * (length - 1) + 1

    def statetorch2policy(self, states):
        out = torch.zeros(states.shape[0], self.n_dim * self.length)
        cols = states + torch.arange(self.n_dim) * self.length
        out.scatter_(1, cols, 1.0)
        return out

    def statetorch2oracle(self, states):
        return self.cells[states]

    def get_mask_invalid_actions_forward(self, states):
        mask = torch.zeros(states.shape[0], self.policy_output_dim, dtype=torch.bool)
        mask[:, : self.n_dim] = states >= self.length - 1
        return mask

    def n_parents(self, states):
        return (states > 0).sum(dim=1)

    def reward_batch(self, states):
        proxy_vals = self.proxy(self.statetorch2oracle(states))
        return torch.clamp(-1.0 * proxy_vals, min=self.reward_min)

    def get_all_terminating_states(self):
        g = torch.meshgrid(*[torch.arange(self.length)] * self.n_dim, indexing="ij")
        return torch.stack([x.reshape(-1) for x in g], dim=1)


def make_mlp(n_in, n_hid, n_layers, n_out):
    layers, d = [], n_in
    for _ in range(n_layers):
        layers += [nn.Linear(d, n_hid), nn.LeakyReLU()]
        d = n_hid
    layers.append(nn.Linear(d, n_out))
    return nn.Sequential(*layers)


class Batch:
    def __init__(self):
        self.parents, self.states, self.actions, self.done, self.traj = [], [], [], [], []

    def add(self, parents, states, actions, done, traj):
        self.parents.append(parents.clone())
        self.states.append(states.clone())
        self.actions.append(actions.clone())
        self.done.append(done.clone())
        self.traj.append(traj.clone())

    def close(self):
        self.parents = torch.cat(self.parents)
        self.states = torch.cat(self.states)
        self.actions = torch.cat(self.actions)
        self.done = torch.cat(self.done)
        self.traj = torch.cat(self.traj)
        return self

    def get_terminating_states(self):
        return self.states[self.done]


class GFlowNetAgent:
    def __init__(self, env, config):
        self.env = env
        self.random_action_prob = config["random_action_prob"]
        p, f = config["policy"], config["state_flow"]
        self.forward_policy = make_mlp(env.policy_input_dim, p["n_hid"], p["n_layers"], env.policy_output_dim)
        self.state_flow = make_mlp(env.policy_input_dim, f["n_hid"], f["n_layers"], 1)
        params = list(self.forward_policy.parameters()) + list(self.state_flow.parameters())
        self.opt = torch.optim.Adam(params, lr=config["optimizer"]["lr"], betas=(0.9, 0.999))
        self.batch_size = config["optimizer"]["batch_size"]
        self.true_states = env.get_all_terminating_states()
        rewards = env.reward_batch(self.true_states)
        self.density_true = (rewards / rewards.sum()).numpy()

    @torch.no_grad()
    def sample_batch(self, n_forward, train=True):
        env = self.env
        states = torch.zeros(n_forward, env.n_dim, dtype=torch.long)
        done = torch.zeros(n_forward, dtype=torch.bool)
        traj = torch.arange(n_forward)
        batch = Batch()
        while not done.all():
            idx = (~done).nonzero(as_tuple=True)[0]
            s = states[idx]
            mask = env.get_mask_invalid_actions_forward(s)
            logits = self.forward_policy(env.statetorch2policy(s))
            if train and self.random_action_prob > 0:
                rand = torch.rand(len(idx)) < self.random_action_prob
                logits[rand] = 0.0
            logits[mask] = -float("inf")
            actions = torch.distributions.Categorical(logits=logits).sample()
            is_eos = actions == env.eos
            new = s.clone()
            rows = (~is_eos).nonzero(as_tuple=True)[0]
            new[rows, actions[rows]] += 1
            batch.add(s, new, actions, is_eos, traj[idx])
            states[idx] = new
            done[idx] = is_eos
        return batch.close()

    def get_logprobs_forward(self, parents, actions):
        env = self.env
        logits = self.forward_policy(env.statetorch2policy(parents))
        logits = logits.masked_fill(env.get_mask_invalid_actions_forward(parents), -float("inf"))
        logprobs = torch.log_softmax(logits, dim=1)
        return logprobs.gather(1, actions.unsqueeze(1)).squeeze(1)

    def get_logprobs_backward(self, states, done):
        # uniform backward policy over the parents of a state; eos has a single parent
        n_par = self.env.n_parents(states).clamp(min=1).float()
        return torch.where(done, torch.zeros_like(n_par), -torch.log(n_par))

    def forwardlooking_loss(self, batch):
        env = self.env
        states, parents, actions, done = batch.states, batch.parents, batch.actions, batch.done
        states_policy = env.statetorch2policy(states)
        parents_policy = env.statetorch2policy(parents)

        logprobs_fwd = self.get_logprobs_forward(parents, actions)
        logprobs_bkw = self.get_logprobs_backward(states, done)

        states_log_flflow = self.state_flow(states_policy)
        # forward-looking flow is 1 in the terminal states
        states_log_flflow[done.eq(1)] = 0.0
        parents_log_flflow = self.state_flow(parents_policy)

        rewards_states = env.reward_batch(states)
        rewards_parents = env.reward_batch(parents)
        energies_states = -torch.log(rewards_states)
        energies_parents = -torch.log(rewards_parents)

        per_node_loss = (
            parents_log_flflow
            - states_log_flflow
            + logprobs_fwd
            - logprobs_bkw
            + energies_states
            - energies_parents
        ).pow(2)

        term_loss = per_node_loss[done].mean()
        nonterm_loss = per_node_loss[~done].mean()
        loss = per_node_loss.mean()
        return loss, term_loss, nonterm_loss

    @torch.no_grad()
    def test(self, n):
        batch = self.sample_batch(n, train=False)
        x_sampled = batch.get_terminating_states()
        hist = defaultdict(int)
        for x in x_sampled.tolist():
            hist[tuple(x)] += 1
        x_tt = self.true_states.tolist()
        z_pred = sum(hist[tuple(x)] for x in x_tt) + 1e-9
        density_pred = np.array([hist[tuple(x)] / z_pred for x in x_tt])
        density_true = self.density_true
        log_density_true = np.log(density_true + 1e-8)
        log_density_pred = np.log(density_pred + 1e-8)
        l1 = np.abs(density_pred - density_true).mean()
        kl = (density_true * (log_density_true - log_density_pred)).sum()
        m = 0.5 * (density_true + density_pred)
        log_m = np.log(m + 1e-8)
        jsd = 0.5 * (density_true * (log_density_true - log_m)).sum()
        jsd += 0.5 * (density_pred * (log_density_pred - log_m)).sum()
        # mass the sampler puts on the four corner modes (cells with reward > half max)
        modes = density_true > 0.5 * density_true.max()
        return l1, kl, jsd, density_pred[modes].sum(), density_true[modes].sum()

    def train(self, n_train_steps, test_period, n_test):
        for it in range(n_train_steps + 1):
            if it % test_period == 0:
                l1, kl, jsd, pm, tm = self.test(n_test)
                print(f"[test] it {it:4d}  L1 {l1:.5f}  KL {kl:.3f}  JSD {jsd:.4f}  "
                      f"mass on modes {pm:.3f} (true {tm:.3f})")
            if it == n_train_steps:
                break
            batch = self.sample_batch(self.batch_size, train=True)
            loss, term_loss, nonterm_loss = self.forwardlooking_loss(batch)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            if it % 20 == 0:
                print(f"it {it:4d}  loss {loss.item():.4f}  term {term_loss.item():.4f}  "
                      f"nonterm {nonterm_loss.item():.4f}  n_transitions {len(batch.done)}")


def main():
    proxy = Corners(config["env"]["n_dim"], **config["proxy"])
    env = Grid(proxy=proxy, **config["env"])
    gflownet = GFlowNetAgent(env, config)
    gflownet.train(config["optimizer"]["n_train_steps"], config["test"]["period"], config["test"]["n"])


if __name__ == "__main__":
    main()
