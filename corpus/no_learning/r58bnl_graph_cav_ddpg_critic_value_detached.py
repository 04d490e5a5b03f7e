"""Graph reinforcement learning for connected automated vehicles (CAVs) in the style of
Jacklinkk/Graph_CAVs: a DDPG agent whose actor and critic are graph convolutional networks
over the vehicle graph (nodes = vehicles, edges = vehicles within communication range).
The environment is a small single-lane ring road written here: every CAV picks an
acceleration, the reward favours the desired speed and penalises short headways."""
import collections
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)

N_VEHICLES = 6
RING_LENGTH = 240.0
V_DES = 15.0
DT = 0.5
A_MAX = 3.0
COMM_RANGE = 60.0
EPISODE_LEN = 40


class RingRoadEnv:
    def __init__(self, seed=0):
        self.rng = np.random.RandomState(seed)

    def reset(self):
        spacing = RING_LENGTH / N_VEHICLES
        self.pos = np.arange(N_VEHICLES) * spacing + self.rng.uniform(-4, 4, N_VEHICLES)
        self.vel = V_DES + self.rng.uniform(-8, 8, N_VEHICLES)
        self.t = 0
        return self._obs()

    def _gaps(self):
        order = np.argsort(self.pos)
        gaps = np.zeros(N_VEHICLES)
        for k, i in enumerate(order):
            leader = order[(k + 1) % N_VEHICLES]
            gaps[i] = (self.pos[leader] - self.pos[i]) % RING_LENGTH
        return gaps

    def _obs(self):
        gaps = self._gaps()
        feats = np.stack([(self.vel - V_DES) / 8.0, gaps / 40.0 - 1.0,
                          np.ones(N_VEHICLES)], axis=1).astype(np.float32)
        d = np.abs(self.pos[:, None] - self.pos[None, :])
        d = np.minimum(d, RING_LENGTH - d)
        adj = (d < COMM_RANGE).astype(np.float32)
        return feats, adj

    def step(self, action):
        acc = np.clip(action, -1.0, 1.0) * A_MAX
        self.vel = np.clip(self.vel + acc * DT, 0.0, 30.0)
        self.pos = (self.pos + self.vel * DT) % RING_LENGTH
        gaps = self._gaps()
        reward = -np.abs(self.vel - V_DES) / 8.0 - 1.0 * (gaps < 8.0)
        self.t += 1
        done = self.t >= EPISODE_LEN
        return self._obs(), reward.astype(np.float32), done


class GraphConv(nn.Module):
    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim)

    def forward(self, x, adj):
        deg = adj.sum(-1, keepdim=True)
        return torch.bmm(adj / deg, self.lin(x))


class GraphActor(nn.Module):
    def __init__(self, n_feat, hidden=32):
        super().__init__()
        self.encoder = nn.Linear(n_feat, hidden)
        self.gcn = GraphConv(hidden, hidden)
        self.policy = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(),
                                    nn.Linear(hidden, 1))

    def forward(self, observation):
        x, adj = observation
        h = F.relu(self.encoder(x))
        g = F.relu(self.gcn(h, adj))
        return torch.tanh(self.policy(torch.cat([h, g], -1))).squeeze(-1)


class GraphCritic(nn.Module):
    def __init__(self, n_feat, hidden=32):
        super().__init__()
        self.encoder = nn.Linear(n_feat + 1, hidden)
        self.gcn = GraphConv(hidden, hidden)
        self.value = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(),
                                   nn.Linear(hidden, 1))

    def forward(self, observation, action):
        x, adj = observation
        h = F.relu(self.encoder(torch.cat([x, action.unsqueeze(-1)], -1)))
        g = F.relu(self.gcn(h, adj))
        return self.value(torch.cat([h, g], -1)).squeeze(-1)


class ReplayBuffer:
    def __init__(self, size):
        self.storage = collections.deque(maxlen=size)

    def add(self, state, action, reward, next_state, done):
        self.storage.append((state, action, reward, next_state, done))

    def sample(self, batch_size):
        idx = np.random.randint(len(self.storage), size=batch_size)
        s, a, r, s2, d = zip(*[self.storage[i] for i in idx])
        state = (torch.as_tensor(np.stack([x[0] for x in s])),
                 torch.as_tensor(np.stack([x[1] for x in s])))
        next_state = (torch.as_tensor(np.stack([x[0] for x in s2])),
                      torch.as_tensor(np.stack([x[1] for x in s2])))
        return (state, torch.as_tensor(np.stack(a)), torch.as_tensor(np.stack(r)),
                next_state, torch.as_tensor(np.array(d, dtype=np.float32))[:, None])


class DDPG:
    def __init__(self, actor_model, actor_optimizer, critic_model, critic_optimizer,
                 explore_noise, replay_buffer, batch_size, update_interval,
                 target_update_interval, soft_update_tau, gamma):
        self.actor_model = actor_model
        self.actor_optimizer = actor_optimizer
        self.critic_model = critic_model
        self.critic_optimizer = critic_optimizer
        self.explore_noise = explore_noise
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.update_interval = update_interval
        self.target_update_interval = target_update_interval
        self.soft_update_tau = soft_update_tau
        self.gamma = gamma
        self.actor_model_target = copy.deepcopy(actor_model)
        self.critic_model_target = copy.deepcopy(critic_model)
        self.time_counter = 0
        self.loss_record = collections.deque(maxlen=100)
        self.critic_loss_record = collections.deque(maxlen=100)

    def store_transition(self, state, action, reward, next_state, done):
        self.replay_buffer.add(state, action, reward, next_state, done)

    def choose_action(self, observation):
        x, adj = observation
        with torch.no_grad():
            action = self.actor_model((torch.as_tensor(x)[None], torch.as_tensor(adj)[None]))[0]
        noise = torch.as_tensor(self.explore_noise(), dtype=torch.float32)
        return (action + noise).clamp(-1.0, 1.0)

    def test_action(self, observation):
        x, adj = observation
        with torch.no_grad():
            return self.actor_model((torch.as_tensor(x)[None], torch.as_tensor(adj)[None]))[0]

    def learn_onestep(self, data_batch):
        state, action, reward, next_state, done = data_batch

        # ------loss of critic network------ #
        action_target = self.actor_model_target(next_state)
        critic_value_next = self.critic_model_target(next_state, action_target)
        critic_value = self.critic_model(state, action)
        critic_value = critic_value.detach()
        critic_target = reward + self.gamma * critic_value_next * (1 - done)
        critic_loss_total = F.smooth_l1_loss(critic_value, critic_target)

        self.critic_optimizer.zero_grad()
        critic_loss_total.backward(retain_graph=True)
        self.critic_optimizer.step()

        # ------loss of actor network------ #
        mu = self.actor_model(state)
        actor_loss_total = -1 * self.critic_model(state, mu).mean()
        self.actor_optimizer.zero_grad()
        actor_loss_total.backward(retain_graph=True)
        self.actor_optimizer.step()

        self.critic_loss_record.append(critic_loss_total.item())
        self.loss_record.append(float((critic_loss_total + actor_loss_total).detach()))

    def synchronize_target(self):
        assert 0.0 < self.soft_update_tau <= 1.0
        for target_param, source_param in zip(self.critic_model_target.parameters(),
                                              self.critic_model.parameters()):
            target_param.data.copy_((1 - self.soft_update_tau) * target_param.data
                                    + self.soft_update_tau * source_param.data)
        for target_param, source_param in zip(self.actor_model_target.parameters(),
                                              self.actor_model.parameters()):
            target_param.data.copy_((1 - self.soft_update_tau) * target_param.data
                                    + self.soft_update_tau * source_param.data)

    def learn(self):
        if (self.time_counter <= 2 * self.batch_size) or \
                (self.time_counter % self.update_interval != 0):
            self.time_counter += 1
            return
        self.learn_onestep(self.replay_buffer.sample(self.batch_size))
        if self.time_counter % self.target_update_interval == 0:
            self.synchronize_target()
        self.time_counter += 1


def evaluate(agent, env, episodes=3):
    returns, speed_err = [], []
    for _ in range(episodes):
        obs = env.reset()
        total, done = 0.0, False
        while not done:
            action = agent.test_action(obs).numpy()
            obs, reward, done = env.step(action)
            total += reward.mean()
        returns.append(total)
        speed_err.append(np.abs(env.vel - V_DES).mean())
    return float(np.mean(returns)), float(np.mean(speed_err))


def main():
    env = RingRoadEnv(seed=1)
    eval_env = RingRoadEnv(seed=123)
    actor = GraphActor(n_feat=3)
    critic = GraphCritic(n_feat=3)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=1e-3)
    critic_optimizer = torch.optim.Adam(critic.parameters(), lr=2e-3)
    explore_noise = lambda: np.random.normal(0.0, 0.2, N_VEHICLES)
    agent = DDPG(actor, actor_optimizer, critic, critic_optimizer, explore_noise,
                 ReplayBuffer(5000), batch_size=32, update_interval=1,
                 target_update_interval=1, soft_update_tau=0.02, gamma=0.9)

    ret, err = evaluate(agent, eval_env)
    print(f"before training: eval return {ret:.2f}  final |v - v_des| {err:.2f} m/s")
    for episode in range(7):
        obs = env.reset()
        done, ep_return = False, 0.0
        while not done:
            action = agent.choose_action(obs).numpy()
            next_obs, reward, done = env.step(action)
            agent.store_transition(obs, action, reward, next_obs, float(done))
            agent.learn()
            obs = next_obs
            ep_return += reward.mean()
        ret, err = evaluate(agent, eval_env)
        critic_loss = np.mean(agent.critic_loss_record) if agent.critic_loss_record else float("nan")
        print(f"episode {episode}  train return {ep_return:.2f}  critic loss {critic_loss:.4f}  "
              f"eval return {ret:.2f}  final |v - v_des| {err:.2f} m/s  "
              f"updates {max(0, agent.time_counter - 2 * agent.batch_size - 1)}")


if __name__ == "__main__":
    main()
