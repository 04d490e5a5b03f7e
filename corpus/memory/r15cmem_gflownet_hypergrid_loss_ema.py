"""GFlowNet on a hypergrid environment, trained with the trajectory balance objective.

States are points of a 4-dimensional grid of side 12, starting at the origin; an action adds
one to a coordinate or stops. The reward has high modes near the corners of the grid. A forward
and a backward policy (MLPs on the one-hot encoded state) and log Z are learned; a moving
average of the loss drives early stopping. Batches of trajectories are sampled on the fly from
the current forward policy (with a little uniform exploration).
"""
import time

import torch
import torch.nn as nn

torch.manual_seed(0)

NDIM = 4
LENGTH = 12
BATCH_SIZE = 64
N_TRAIN_STEPS = 200
LR = 1e-3
LR_Z = 1e-1
EMA_ALPHA = 0.5
EARLY_STOPPING = 1e-4
RANDOM_ACTION_PROB = 0.1
LOG_EVERY = 25


class HyperGrid:
    """Vectorised hypergrid: a batch of states is an (n, NDIM) long tensor."""

    def __init__(self, ndim, length, r0=1e-2, r1=0.5, r2=2.0):
        self.ndim, self.length = ndim, length
        self.r0, self.r1, self.r2 = r0, r1, r2
        self.n_actions = ndim + 1  # one increment per dimension, plus stop
        self.eos = ndim

    def encode(self, states):
        onehot = nn.functional.one_hot(states, self.length).float()
        return onehot.view(states.shape[0], -1)

    def mask_forward(self, states):
        mask = torch.zeros(states.shape[0], self.n_actions, dtype=torch.bool)
        mask[:, :self.ndim] = states >= self.length - 1
        return mask

    def mask_backward(self, states):
        return states <= 0

    def reward(self, states):
        ax = (states.float() / (self.length - 1) - 0.5).abs()
        return (self.r0 + self.r1 * (ax > 0.25).all(dim=1).float()
                + self.r2 * ((ax > 0.3) & (ax < 0.4)).all(dim=1).float())


def make_mlp(n_in, n_hid, n_out):
    return nn.Sequential(nn.Linear(n_in, n_hid), nn.LeakyReLU(),
                         nn.Linear(n_hid, n_hid), nn.LeakyReLU(),
                         nn.Linear(n_hid, n_out))


class GFlowNetAgent:
    def __init__(self, env):
        self.env = env
        n_in = env.ndim * env.length
        self.forward_policy = make_mlp(n_in, 128, env.n_actions)
        self.backward_policy = make_mlp(n_in, 128, env.ndim)
        self.logZ = nn.Parameter(torch.zeros(1))
        self.opt = torch.optim.Adam([
            {"params": self.forward_policy.parameters(), "lr": LR},
            {"params": self.backward_policy.parameters(), "lr": LR},
            {"params": [self.logZ], "lr": LR_Z},
        ])

    def parameters(self):
        return (list(self.forward_policy.parameters()) + list(self.backward_policy.parameters())
                + [self.logZ])

    def sample_trajectories(self, n):
        """Samples n trajectories from the forward policy and accumulates, for each one, the
        log-probabilities of its forward actions and of the matching backward actions."""
        env = self.env
        states = torch.zeros(n, env.ndim, dtype=torch.long)
        active = torch.ones(n, dtype=torch.bool)
        sum_logpf = torch.zeros(n)
        sum_logpb = torch.zeros(n)
        n_transitions = 0
        while active.any():
            mask_f = env.mask_forward(states)
            logits_f = self.forward_policy(env.encode(states)).masked_fill(mask_f, -1e3)
            logprobs_f = torch.log_softmax(logits_f, dim=1)
            with torch.no_grad():
                uniform = (~mask_f).float()
                uniform = uniform / uniform.sum(dim=1, keepdim=True)
                probs = (1 - RANDOM_ACTION_PROB) * logprobs_f.exp() + RANDOM_ACTION_PROB * uniform
                actions = torch.multinomial(probs, 1).squeeze(1)
            actions = torch.where(active, actions, torch.full_like(actions, env.eos))
            lpf = logprobs_f.gather(1, actions[:, None]).squeeze(1)
            sum_logpf = sum_logpf + torch.where(active, lpf, torch.zeros_like(lpf))
            moving = active & (actions != env.eos)
            new_states = states.clone()
            new_states[moving, actions[moving]] += 1
            logits_b = self.backward_policy(env.encode(new_states))
            logits_b = logits_b.masked_fill(env.mask_backward(new_states), -1e3)
            lpb = torch.log_softmax(logits_b, dim=1).gather(
                1, actions.clamp(max=env.ndim - 1)[:, None]).squeeze(1)
            sum_logpb = sum_logpb + torch.where(moving, lpb, torch.zeros_like(lpb))
            n_transitions += int(active.sum())
            states = new_states
            active = moving
        return states, sum_logpf, sum_logpb, n_transitions

    def trajectorybalance_loss(self, n):
        states, sum_logpf, sum_logpb, n_transitions = self.sample_trajectories(n)
        rewards = self.env.reward(states)
        loss = (self.logZ.sum() + sum_logpf - sum_logpb - torch.log(rewards)).pow(2).mean()
        return (loss, loss, loss), rewards, n_transitions

    def train(self):
        all_losses = []
        loss_term_ema = None
        loss_flow_ema = None
        t_start = time.time()
        for it in range(1, N_TRAIN_STEPS + 1):
            losses, rewards, n_transitions = self.trajectorybalance_loss(BATCH_SIZE)
            if not all(torch.isfinite(loss) for loss in losses):
                print("Loss is not finite - skipping iteration")
                continue
            self.opt.zero_grad()
            losses[0].backward()
            torch.nn.utils.clip_grad_norm_(self.parameters(), 10.0)
            self.opt.step()
            all_losses.append([loss.item() for loss in losses])

            # Moving average of the loss for early stopping
            if loss_term_ema and loss_flow_ema:
                loss_term_ema = EMA_ALPHA * losses[1] + (1.0 - EMA_ALPHA) * loss_term_ema
                loss_flow_ema = EMA_ALPHA * losses[2] + (1.0 - EMA_ALPHA) * loss_flow_ema
                if loss_term_ema < EARLY_STOPPING and loss_flow_ema < EARLY_STOPPING:
                    break
            else:
                loss_term_ema = losses[1]
                loss_flow_ema = losses[2]

            if it % LOG_EVERY == 0 or it == 1:
                print(f"it {it:4d}  loss {all_losses[-1][0]:8.3f}  logZ {self.logZ.item():6.3f}  "
                      f"mean reward {rewards.mean().item():.3f}  transitions {n_transitions}  "
                      f"{time.time() - t_start:5.1f}s")
        return all_losses


env = HyperGrid(NDIM, LENGTH)
agent = GFlowNetAgent(env)
true_logZ = torch.log(env.reward(torch.cartesian_prod(*[torch.arange(LENGTH)] * NDIM)).sum())
print(f"true log Z = {true_logZ.item():.3f}")
agent.train()
print(f"learned log Z = {agent.logZ.item():.3f}")
