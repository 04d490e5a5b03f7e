"""Dreamer (v1) from pixels, in the style of SimpleDreamer: an RSSM world model (conv encoder,
GRU recurrent model, transition / representation models, conv decoder, reward model) learned
from a replay buffer, an actor and a critic trained on imagined rollouts, and episodes
collected with the current actor. The environment is a small top-down 'point-mass reach'
task rendered to 64x64 RGB frames (the task never terminates by itself: 800-step episodes)."""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, Independent, TanhTransform, TransformedDistribution

torch.manual_seed(0)
np.random.seed(0)


class AttrDict(dict):
    __getattr__ = dict.__getitem__
    __setattr__ = dict.__setitem__


config = AttrDict(
    device='cpu', seed_episodes=1, train_iterations=1, collect_interval=8,
    num_interaction_episodes=1, num_evaluate=1, batch_size=6, batch_length=10,
    horizon_length=10, kl_divergence_scale=1.0, free_nats=3.0, discount=0.99, lambda_=0.95,
    model_learning_rate=6e-4, actor_learning_rate=8e-5, critic_learning_rate=8e-5, clip_grad=100,
    deterministic_size=200, stochastic_size=30, embedded_state_size=1024, encoder_depth=32,
    decoder_depth=16, hidden_size=200,
    capacity=20000, max_episode_steps=800,
)


class PointMassReach:
    """Move a red dot to a green target; observations are 3x64x64 uint8 frames."""

    def __init__(self, seed=0):
        self.rng = np.random.RandomState(seed)
        self.action_size = 2
        self.observation_shape = (3, 64, 64)

    def render(self):
        frame = np.zeros(self.observation_shape, dtype=np.uint8)
        frame[:, ::8, :] = 40
        frame[:, :, ::8] = 40
        gy, gx = (self.goal * 56 + 4).astype(int)
        py, px = (self.pos * 56 + 4).astype(int)
        frame[1, gy - 3:gy + 3, gx - 3:gx + 3] = 255
        frame[0, py - 2:py + 2, px - 2:px + 2] = 255
        return frame

    def reset(self):
        self.pos = self.rng.uniform(0.1, 0.9, 2)
        self.goal = self.rng.uniform(0.1, 0.9, 2)
        self.t = 0
        return self.render()

    def step(self, action):
        self.pos = np.clip(self.pos + 0.03 * np.clip(action, -1, 1), 0.0, 1.0)
        self.t += 1
        reward = -float(np.linalg.norm(self.pos - self.goal))
        done = self.t >= config.max_episode_steps
        return self.render(), reward, done, {}


def pixel_normalization(x):
    return x / 255.0 - 0.5


def create_normal_dist(x, std=None, min_std=0.1, event_shape=None):
    if std is None:
        mean, std = torch.chunk(x, 2, -1)
        std = F.softplus(std) + min_std
    else:
        mean = x
    dist = Normal(mean, std)
    if event_shape:
        dist = Independent(dist, event_shape)
    return dist


def build_network(input_size, hidden_size, num_layers, output_size):
    layers = [nn.Linear(input_size, hidden_size), nn.ELU()]
    for _ in range(num_layers - 1):
        layers += [nn.Linear(hidden_size, hidden_size), nn.ELU()]
    layers += [nn.Linear(hidden_size, output_size)]
    return nn.Sequential(*layers)


class Encoder(nn.Module):
    def __init__(self, depth=32):
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(3, depth, 4, 2), nn.ReLU(),
            nn.Conv2d(depth, depth * 2, 4, 2), nn.ReLU(),
            nn.Conv2d(depth * 2, depth * 4, 4, 2), nn.ReLU(),
            nn.Conv2d(depth * 4, depth * 8, 4, 2), nn.ReLU())

    def forward(self, x):
        batch_shape = x.shape[:-3]
        x = self.network(pixel_normalization(x).reshape(-1, 3, 64, 64))
        return x.reshape(*batch_shape, -1)


class Decoder(nn.Module):
    def __init__(self, depth=32):
        super().__init__()
        self.depth = depth
        self.linear = nn.Linear(config.stochastic_size + config.deterministic_size, depth * 32)
        self.network = nn.Sequential(
            nn.ConvTranspose2d(depth * 32, depth * 4, 5, 2), nn.ReLU(),
            nn.ConvTranspose2d(depth * 4, depth * 2, 5, 2), nn.ReLU(),
            nn.ConvTranspose2d(depth * 2, depth * 1, 6, 2), nn.ReLU(),
            nn.ConvTranspose2d(depth * 1, 3, 6, 2))

    def forward(self, posterior, deterministic):
        batch_shape = posterior.shape[:-1]
        x = self.linear(torch.cat((posterior, deterministic), -1)).reshape(-1, self.depth * 32, 1, 1)
        x = self.network(x).reshape(*batch_shape, 3, 64, 64)
        return create_normal_dist(x, std=1, event_shape=3)


class RecurrentModel(nn.Module):
    def __init__(self, action_size):
        super().__init__()
        self.linear = nn.Linear(config.stochastic_size + action_size, config.hidden_size)
        self.recurrent = nn.GRUCell(config.hidden_size, config.deterministic_size)

    def forward(self, embedded_state, action, deterministic):
        x = F.elu(self.linear(torch.cat((embedded_state, action), 1)))
        return self.recurrent(x, deterministic)


class TransitionModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.network = build_network(config.deterministic_size, config.hidden_size, 2,
                                     config.stochastic_size * 2)

    def forward(self, x):
        prior_dist = create_normal_dist(self.network(x))
        return prior_dist, prior_dist.rsample()


class RepresentationModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.network = build_network(config.embedded_state_size + config.deterministic_size,
                                     config.hidden_size, 2, config.stochastic_size * 2)

    def forward(self, embedded_observation, deterministic):
        posterior_dist = create_normal_dist(self.network(torch.cat((embedded_observation, deterministic), 1)))
        return posterior_dist, posterior_dist.rsample()


class RSSM(nn.Module):
    def __init__(self, action_size):
        super().__init__()
        self.recurrent_model = RecurrentModel(action_size)
        self.transition_model = TransitionModel()
        self.representation_model = RepresentationModel()

    def recurrent_model_input_init(self, batch_size):
        return (torch.zeros(batch_size, config.stochastic_size),
                torch.zeros(batch_size, config.deterministic_size))


class RewardModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.network = build_network(config.stochastic_size + config.deterministic_size, 400, 2, 1)

    def forward(self, posterior, deterministic):
        return create_normal_dist(self.network(torch.cat((posterior, deterministic), -1)), std=1, event_shape=1)


class Actor(nn.Module):
    def __init__(self, action_size):
        super().__init__()
        self.network = build_network(config.stochastic_size + config.deterministic_size, 400, 2,
                                     action_size * 2)

    def forward(self, posterior, deterministic):
        mean, std = torch.chunk(self.network(torch.cat((posterior, deterministic), -1)), 2, -1)
        mean = 5.0 * torch.tanh(mean / 5.0)
        std = F.softplus(std + 5.0) + 1e-4
        dist = TransformedDistribution(Normal(mean, std), TanhTransform())
        return Independent(dist, 1).rsample()


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.network = build_network(config.stochastic_size + config.deterministic_size, 400, 3, 1)

    def forward(self, posterior, deterministic):
        return create_normal_dist(self.network(torch.cat((posterior, deterministic), -1)), std=1, event_shape=1)


class ReplayBuffer:
    def __init__(self, observation_shape, action_size):
        self.observation = np.empty((config.capacity, *observation_shape), dtype=np.uint8)
        self.action = np.empty((config.capacity, action_size), dtype=np.float32)
        self.reward = np.empty((config.capacity, 1), dtype=np.float32)
        self.buffer_index = 0

    def __len__(self):
        return self.buffer_index

    def add(self, observation, action, reward):
        self.observation[self.buffer_index] = observation
        self.action[self.buffer_index] = action
        self.reward[self.buffer_index] = reward
        self.buffer_index += 1

    def sample(self, batch_size, chunk_size):
        start = np.random.randint(0, self.buffer_index - chunk_size, batch_size).reshape(-1, 1)
        idx = start + np.arange(chunk_size).reshape(1, -1)
        return AttrDict(observation=torch.as_tensor(self.observation[idx]).float(),
                        action=torch.as_tensor(self.action[idx]),
                        reward=torch.as_tensor(self.reward[idx]))


def compute_lambda_values(rewards, values, continues, horizon_length, lambda_):
    rewards, continues = rewards[:, :-1], continues[:, :-1]
    next_values, last = values[:, 1:], values[:, -1]
    inputs = rewards + continues * next_values * (1 - lambda_)
    outputs = []
    for index in reversed(range(horizon_length - 1)):
        last = inputs[:, index] + continues[:, index] * lambda_ * last
        outputs.append(last)
    return torch.stack(list(reversed(outputs)), dim=1)


class Dreamer:
    def __init__(self, observation_shape, action_size):
        self.action_size = action_size
        self.encoder = Encoder(config.encoder_depth)
        self.decoder = Decoder(config.decoder_depth)
        self.rssm = RSSM(action_size)
        self.reward_predictor = RewardModel()
        self.actor = Actor(action_size)
        self.critic = Critic()
        self.buffer = ReplayBuffer(observation_shape, action_size)
        self.model_params = (list(self.encoder.parameters()) + list(self.decoder.parameters())
                             + list(self.rssm.parameters()) + list(self.reward_predictor.parameters()))
        self.model_optimizer = torch.optim.Adam(self.model_params, lr=config.model_learning_rate)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=config.actor_learning_rate)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=config.critic_learning_rate)
        self.num_total_episode = 0
        self.num_updates = 0

    def train(self, env):
        if len(self.buffer) < 1:
            self.environment_interaction(env, config.seed_episodes)
        for iteration in range(config.train_iterations):
            for collect_interval in range(config.collect_interval):
                data = self.buffer.sample(config.batch_size, config.batch_length)
                posteriors, deterministics = self.dynamic_learning(data)
                self.behavior_learning(posteriors, deterministics)
            self.environment_interaction(env, config.num_interaction_episodes)
            self.evaluate(env)

    def evaluate(self, env):
        self.environment_interaction(env, config.num_evaluate, train=False)

    def dynamic_learning(self, data):
        prior, deterministic = self.rssm.recurrent_model_input_init(len(data.action))
        embedded_observation = self.encoder(data.observation)
        priors, posteriors, deterministics, prior_dists, posterior_dists = [], [], [], [], []
        for t in range(1, config.batch_length):
            deterministic = self.rssm.recurrent_model(prior, data.action[:, t - 1], deterministic)
            prior_dist, prior = self.rssm.transition_model(deterministic)
            posterior_dist, posterior = self.rssm.representation_model(embedded_observation[:, t], deterministic)
            priors.append(prior)
            posteriors.append(posterior)
            deterministics.append(deterministic)
            prior_dists.append(torch.cat([prior_dist.mean, prior_dist.scale], -1))
            posterior_dists.append(torch.cat([posterior_dist.mean, posterior_dist.scale], -1))
            prior = posterior
        posteriors = torch.stack(posteriors, 1)
        deterministics = torch.stack(deterministics, 1)
        prior_stats = torch.stack(prior_dists, 1)
        posterior_stats = torch.stack(posterior_dists, 1)

        reconstruction_loss = self.decoder(posteriors, deterministics).log_prob(
            pixel_normalization(data.observation[:, 1:]))
        reward_loss = self.reward_predictor(posteriors, deterministics).log_prob(data.reward[:, 1:])
        prior_dist = create_normal_dist(*torch.chunk(prior_stats, 2, -1), event_shape=1)
        posterior_dist = create_normal_dist(*torch.chunk(posterior_stats, 2, -1), event_shape=1)
        kl_divergence_loss = torch.mean(torch.distributions.kl.kl_divergence(posterior_dist, prior_dist))
        kl_divergence_loss = torch.max(torch.tensor(config.free_nats), kl_divergence_loss)
        model_loss = (config.kl_divergence_scale * kl_divergence_loss
                      - reconstruction_loss.mean() - reward_loss.mean())
        self.model_optimizer.zero_grad()
        model_loss.backward()
        nn.utils.clip_grad_norm_(self.model_params, config.clip_grad)
        self.model_optimizer.step()
        self.num_updates += 1
        if self.num_updates % 4 == 0:
            print(f"update {self.num_updates:3d} model loss {model_loss.item():9.2f} "
                  f"kl {kl_divergence_loss.item():.3f} reward nll {-reward_loss.mean().item():.3f}", flush=True)
        return posteriors.detach(), deterministics.detach()

    def behavior_learning(self, states, deterministics):
        state = states.reshape(-1, config.stochastic_size)
        deterministic = deterministics.reshape(-1, config.deterministic_size)
        priors, dets = [], []
        for t in range(config.horizon_length):
            action = self.actor(state, deterministic)
            deterministic = self.rssm.recurrent_model(state, action, deterministic)
            _, state = self.rssm.transition_model(deterministic)
            priors.append(state)
            dets.append(deterministic)
        priors = torch.stack(priors, 1)
        dets = torch.stack(dets, 1)
        predicted_rewards = self.reward_predictor(priors, dets).mean
        values = self.critic(priors, dets).mean
        continues = config.discount * torch.ones_like(values)
        lambda_values = compute_lambda_values(predicted_rewards, values, continues,
                                              config.horizon_length, config.lambda_)
        actor_loss = -torch.mean(lambda_values)
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        nn.utils.clip_grad_norm_(self.actor.parameters(), config.clip_grad)
        self.actor_optimizer.step()

        value_dist = self.critic(priors.detach()[:, :-1], dets.detach()[:, :-1])
        value_loss = -torch.mean(value_dist.log_prob(lambda_values.detach()))
        self.critic_optimizer.zero_grad()
        value_loss.backward()
        nn.utils.clip_grad_norm_(self.critic.parameters(), config.clip_grad)
        self.critic_optimizer.step()

    def environment_interaction(self, env, num_interaction_episodes, train=True):
        for epi in range(num_interaction_episodes):
            posterior, deterministic = self.rssm.recurrent_model_input_init(1)
            action = torch.zeros(1, self.action_size)
            observation = env.reset()
            embedded_observation = self.encoder(torch.from_numpy(observation).float())
            score = 0
            done = False
            while not done:
                deterministic = self.rssm.recurrent_model(posterior, action, deterministic)
                embedded_observation = embedded_observation.reshape(1, -1)
                _, posterior = self.rssm.representation_model(embedded_observation, deterministic)
                action = self.actor(posterior, deterministic).detach()
                buffer_action = action.cpu().numpy()[0]
                next_observation, reward, done, info = env.step(buffer_action)
                if train:
                    self.buffer.add(observation, buffer_action, reward)
                score += reward
                embedded_observation = self.encoder(torch.from_numpy(next_observation).float())
                observation = next_observation
            if train:
                self.num_total_episode += 1
                print(f"episode {self.num_total_episode} training score {score:.1f} "
                      f"({len(self.buffer)} steps in buffer)", flush=True)
            else:
                print(f"evaluate score : {score:.1f}", flush=True)


if __name__ == '__main__':
    t0 = time.time()
    env = PointMassReach(seed=0)
    agent = Dreamer(env.observation_shape, env.action_size)
    agent.train(env)
    print(f"done in {time.time() - t0:.1f}s")
