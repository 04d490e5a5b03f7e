"""GFlowNet sanity check: train a trajectory-balance GFlowNet on a 2-d hypergrid with the
'corners' reward, in the style of alexhernandezgarcia/gflownet (GFlowNetEnv with
sample_actions_batch / get_logprobs, an MLP forward policy, a uniform backward policy and a
learned log Z). The exact terminating distribution of the forward policy is computed by
dynamic programming on the grid and compared to R(x) / Z."""
import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)


class GridEnv:
    """Hyper-grid of side `length` in `n_dim` dimensions. Actions: +1 on one dimension,
    or EOS. States are integer coordinates, the source is the origin."""

    def __init__(self, n_dim=2, length=8, reward_func="corners", R0=0.1, R1=0.5, R2=2.0):
        self.n_dim = n_dim
        self.length = length
        self.action_space = [tuple(int(i == d) for i in range(n_dim)) for d in range(n_dim)]
        self.eos = tuple([0] * n_dim)
        self.action_space.append(self.eos)
        self.action_space_dim = len(self.action_space)
        self.policy_output_dim = self.action_space_dim
        self.R0, self.R1, self.R2 = R0, R1, R2
        self.logsoftmax = nn.LogSoftmax(dim=1)
        self.random_policy_output = torch.ones(self.action_space_dim)

    def reward(self, states):
        x = states.float() / (self.length - 1)
        ax = (x - 0.5).abs()
        r = self.R0 + self.R1 * (ax > 0.25).all(-1).float() \
            + self.R2 * ((ax > 0.3) & (ax < 0.4)).all(-1).float()
        return r

    def get_mask_invalid_actions_forward(self, states, done):
        mask = torch.zeros(len(states), self.action_space_dim, dtype=torch.bool)
        mask[:, :self.n_dim] = states >= self.length - 1
        mask[done] = True
        return mask

    def get_mask_invalid_actions_backward(self, states):
        # parents: one step back along each dimension with a coordinate > 0
        mask = torch.ones(len(states), self.action_space_dim, dtype=torch.bool)
        mask[:, :self.n_dim] = states <= 0
        return mask

    def states2policy(self, states):
        onehot = torch.zeros(len(states), self.n_dim * self.length)
        for d in range(self.n_dim):
            onehot[torch.arange(len(states)), d * self.length + states[:, d]] = 1.0
        return onehot

    def sample_actions_batch(self, policy_outputs, mask, temperature_logits=1.0):
        logits = policy_outputs.clone().detach()
        logits /= temperature_logits
        logits[mask] = -torch.inf
        action_indices = torch.distributions.Categorical(logits=logits).sample()
        return action_indices

    def get_logprobs(self, policy_outputs, actions, mask=None):
        ns_range = torch.arange(policy_outputs.shape[0])
        logits = policy_outputs.clone().detach()
        if mask is not None:
            logits[mask] = -torch.inf
        logprobs = self.logsoftmax(logits)[ns_range, actions]
        return logprobs

    def step(self, states, action_indices):
        states = states.clone()
        is_eos = action_indices == self.n_dim
        moving = ~is_eos
        states[moving, action_indices[moving]] += 1
        return states, is_eos


class Policy(nn.Module):
    def __init__(self, input_dim, output_dim, n_hid=128, n_layers=2):
        super().__init__()
        layers = [nn.Linear(input_dim, n_hid), nn.LeakyReLU()]
        for _ in range(n_layers - 1):
            layers += [nn.Linear(n_hid, n_hid), nn.LeakyReLU()]
        layers += [nn.Linear(n_hid, output_dim)]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


class GFlowNetAgent:
    def __init__(self, env, lr=1e-3, lr_z_mult=100, batch_size=32):
        self.env = env
        self.batch_size = batch_size
        self.forward_policy = Policy(env.n_dim * env.length, env.policy_output_dim)
        self.logZ = nn.Parameter(torch.zeros(16))
        self.opt = torch.optim.Adam([
            {"params": self.forward_policy.parameters(), "lr": lr},
            {"params": [self.logZ], "lr": lr * lr_z_mult},
        ], betas=(0.9, 0.999))

    @torch.no_grad()
    def sample_batch(self):
        env = self.env
        B = self.batch_size
        states = torch.zeros(B, env.n_dim, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        traj_states, traj_actions, traj_masks, traj_ids = [], [], [], []
        while not done.all():
            active = (~done).nonzero().squeeze(1)
            s = states[active]
            mask = env.get_mask_invalid_actions_forward(s, done[active])
            policy_outputs = self.forward_policy(env.states2policy(s))
            actions = env.sample_actions_batch(policy_outputs, mask)
            traj_states.append(s)
            traj_actions.append(actions)
            traj_masks.append(mask)
            traj_ids.append(active)
            new_states, is_eos = env.step(s, actions)
            states[active] = new_states
            done[active[is_eos]] = True
        return (states, torch.cat(traj_states), torch.cat(traj_actions),
                torch.cat(traj_masks), torch.cat(traj_ids))

    def trajectorybalance_loss(self, batch):
        env = self.env
        final_states, states, actions, masks, traj_ids = batch
        policy_outputs = self.forward_policy(env.states2policy(states))
        logprobs_f = env.get_logprobs(policy_outputs, actions, masks)
        # uniform backward policy over the parents of each state reached by a move
        moved = actions != env.n_dim
        children = states.clone()
        children[moved, actions[moved]] += 1
        mask_b = env.get_mask_invalid_actions_backward(children)
        random_outputs = env.random_policy_output.expand(int(moved.sum()), -1)
        logprobs_b = torch.zeros(len(states))
        logprobs_b[moved] = env.get_logprobs(random_outputs, actions[moved], mask_b[moved])
        sumlogprobs_f = torch.zeros(self.batch_size).index_add_(0, traj_ids, logprobs_f)
        sumlogprobs_b = torch.zeros(self.batch_size).index_add_(0, traj_ids, logprobs_b)
        logrewards = torch.log(env.reward(final_states))
        loss = (self.logZ.sum() + sumlogprobs_f - logrewards - sumlogprobs_b).pow(2).mean()
        return loss, logrewards

    @torch.no_grad()
    def exact_terminating_distribution(self):
        """P_T(x) of the forward policy, by pushing probability mass through the grid DAG."""
        env = self.env
        L = env.length
        coords = torch.tensor([(i, j) for i in range(L) for j in range(L)])
        mask = env.get_mask_invalid_actions_forward(coords, torch.zeros(len(coords), dtype=torch.bool))
        logits = self.forward_policy(env.states2policy(coords))
        logits[mask] = -torch.inf
        probs = torch.softmax(logits, dim=1).view(L, L, -1)
        flow = torch.zeros(L, L)
        flow[0, 0] = 1.0
        p_term = torch.zeros(L, L)
        for total in range(2 * L - 1):
            for i in range(max(0, total - L + 1), min(L, total + 1)):
                j = total - i
                p_term[i, j] = flow[i, j] * probs[i, j, 2]
                if i + 1 < L:
                    flow[i + 1, j] += flow[i, j] * probs[i, j, 0]
                if j + 1 < L:
                    flow[i, j + 1] += flow[i, j] * probs[i, j, 1]
        rewards = env.reward(coords).view(L, L)
        target = rewards / rewards.sum()
        l1 = (p_term - target).abs().sum().item()
        return l1, math.log(rewards.sum().item()), (p_term * rewards).sum().item()


def main():
    env = GridEnv(n_dim=2, length=8)
    agent = GFlowNetAgent(env, lr=1e-3, lr_z_mult=100, batch_size=32)
    n_train_steps = 200
    l1, true_logz, exp_r = agent.exact_terminating_distribution()
    print("true log Z = %.3f | initial L1(P_T, R/Z) = %.3f | E[R] = %.3f" % (true_logz, l1, exp_r))
    for it in range(1, n_train_steps + 1):
        batch = agent.sample_batch()
        loss, logrewards = agent.trajectorybalance_loss(batch)
        agent.opt.zero_grad()
        loss.backward()
        agent.opt.step()
        if it == 1 or it % 25 == 0:
            l1, _, exp_r = agent.exact_terminating_distribution()
            print("iter %3d | TB loss %.4f | log Z %.3f | mean R(batch) %.3f | L1 %.3f | E_PT[R] %.3f"
                  % (it, loss.item(), agent.logZ.sum().item(), logrewards.exp().mean().item(), l1, exp_r))


if __name__ == "__main__":
    main()
