"""Dreamer-style agent (RSSM world model + actor + value learned in imagination) on a
2-D point-mass reaching task with vector observations."""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Normal, Independent, kl_divergence

torch.manual_seed(0)
np.random.seed(0)

OBS_DIM, ACT_DIM = 4, 2
DETER, STOCH, HIDDEN = 32, 8, 32


class PointMassEnv:
    def __init__(self, horizon=30):
        self.horizon = horizon

    def reset(self):
        self.t = 0
        self.pos = np.random.uniform(-1.0, 1.0, size=2)
        self.vel = np.zeros(2)
        return self._obs()

    def _obs(self):
        return np.concatenate([self.pos, self.vel]).astype(np.float32)

    def step(self, action):
        action = np.clip(action, -1.0, 1.0)
        self.vel = 0.8 * self.vel + 0.1 * action
        self.pos = np.clip(self.pos + self.vel, -2.0, 2.0)
        self.t += 1
        reward = -float(np.linalg.norm(self.pos))
        return self._obs(), reward, self.t >= self.horizon


class ReplayBuffer:
    def __init__(self):
        self.episodes = []

    def add(self, obs, act, rew):
        self.episodes.append((np.stack(obs), np.stack(act), np.array(rew, dtype=np.float32)))

    def sample_batch(self, batch_b, batch_t):
        obs, act, rew = [], [], []
        for _ in range(batch_b):
            o, a, r = self.episodes[np.random.randint(len(self.episodes))]
            s = np.random.randint(0, len(o) - batch_t)
            obs.append(o[s:s + batch_t]); act.append(a[s:s + batch_t]); rew.append(r[s:s + batch_t])
        to_t = lambda x: torch.from_numpy(np.stack(x, axis=1)).float()
        return to_t(obs), to_t(act), to_t(rew).unsqueeze(-1)


def mlp(inp, out, hidden=HIDDEN):
    return nn.Sequential(nn.Linear(inp, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU(), nn.Linear(hidden, out))


class RSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(STOCH + ACT_DIM, DETER)
        self.prior_net = mlp(DETER, 2 * STOCH)

    def initial_state(self, batch):
        return torch.zeros(batch, DETER), torch.zeros(batch, STOCH)

    def dist(self, stats):
        mean, std = stats.chunk(2, -1)
        return Independent(Normal(mean, F.softplus(std) + 0.1), 1)

    def img_step(self, deter, stoch, action):
        deter = self.cell(torch.cat([stoch, action], -1), deter)
        prior = self.dist(self.prior_net(deter))
        return deter, prior


class Representation(nn.Module):
    def __init__(self):
        super().__init__()
        self.post_net = mlp(DETER + HIDDEN, 2 * STOCH)

    def forward(self, deter, embed, rssm):
        return rssm.dist(self.post_net(torch.cat([deter, embed], -1)))


class DreamerModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.observation_encoder = mlp(OBS_DIM, HIDDEN)
        self.observation_decoder = mlp(DETER + STOCH, OBS_DIM)
        self.reward_model = mlp(DETER + STOCH, 1)
        self.transition = RSSM()
        self.representation = Representation()
        self.action_decoder = mlp(DETER + STOCH, ACT_DIM)
        self.value_model = mlp(DETER + STOCH, 1)

    def policy(self, feat, explore=False):
        action = torch.tanh(self.action_decoder(feat))
        if explore:
            action = (action + 0.3 * torch.randn_like(action)).clamp(-1, 1)
        return action


def get_parameters(modules):
    params = []
    for m in modules:
        params += list(m.parameters())
    return params


class FreezeParameters:
    def __init__(self, modules):
        self.params = get_parameters(modules)

    def __enter__(self):
        self.old = [p.requires_grad for p in self.params]
        for p in self.params:
            p.requires_grad_(False)

    def __exit__(self, *args):
        for p, old in zip(self.params, self.old):
            p.requires_grad_(old)


def compute_return(reward, value, discount, bootstrap, lambda_):
    next_values = torch.cat([value[1:], bootstrap[None]], 0)
    target = reward + discount * next_values * (1 - lambda_)
    outputs, last = [], bootstrap
    for t in reversed(range(reward.shape[0])):
        last = target[t] + discount[t] * lambda_ * last
        outputs.append(last)
    return torch.stack(outputs[::-1], 0)


class Dreamer:
    def __init__(self, model, model_lr=6e-4, actor_lr=2e-4, value_lr=1e-3, horizon=8,
                 discount=0.9, discount_lambda=0.95, free_nats=3.0, grad_clip=100.0):
        self.model = model
        self.horizon, self.discount, self.discount_lambda = horizon, discount, discount_lambda
        self.free_nats, self.grad_clip = free_nats, grad_clip
        self.model_modules = [model.observation_encoder, model.observation_decoder, model.reward_model,
                              model.representation, model.transition]
        self.actor_modules = [model.action_decoder]
        self.value_modules = [model.value_model]
        self.model_optimizer = torch.optim.Adam(get_parameters(self.model_modules), lr=model_lr)
        self.actor_optimizer = torch.optim.Adam(get_parameters(self.actor_modules), lr=actor_lr)
        self.value_optimizer = torch.optim.Adam(get_parameters(self.model_modules), lr=value_lr)

    def loss(self, observation, action, reward):
        model = self.model
        batch_t, batch_b = observation.shape[:2]
        embed = model.observation_encoder(observation)
        deter, stoch = model.transition.initial_state(batch_b)
        priors, posts, feats = [], [], []
        for t in range(batch_t):
            prev_action = action[t - 1] if t > 0 else torch.zeros_like(action[0])
            deter, prior = model.transition.img_step(deter, stoch, prev_action)
            post = model.representation(deter, embed[t], model.transition)
            stoch = post.rsample()
            priors.append(prior); posts.append(post); feats.append(torch.cat([deter, stoch], -1))
        feat = torch.stack(feats, 0)

        image_loss = -Independent(Normal(model.observation_decoder(feat), 1.0), 1).log_prob(observation).mean()
        reward_loss = -Normal(model.reward_model(feat), 1.0).log_prob(reward).mean()
        div = torch.stack([kl_divergence(q, p) for q, p in zip(posts, priors)]).mean()
        div = torch.clamp(div, min=self.free_nats)
        model_loss = div + reward_loss + image_loss

        with torch.no_grad():
            start = feat.reshape(batch_t * batch_b, -1)
        with FreezeParameters(self.model_modules):
            deter, stoch = start[:, :DETER], start[:, DETER:]
            imag = []
            for _ in range(self.horizon):
                a = model.policy(torch.cat([deter, stoch], -1))
                deter, prior = model.transition.img_step(deter, stoch, a)
                stoch = prior.rsample()
                imag.append(torch.cat([deter, stoch], -1))
            imag_feat = torch.stack(imag, 0)

        with FreezeParameters(self.model_modules + self.value_modules):
            imag_reward = model.reward_model(imag_feat)
            value = model.value_model(imag_feat)
        discount_arr = self.discount * torch.ones_like(imag_reward)
        returns = compute_return(imag_reward[:-1], value[:-1], discount_arr[:-1],
                                 bootstrap=value[-1], lambda_=self.discount_lambda)
        discount_arr = torch.cat([torch.ones_like(discount_arr[:1]), discount_arr[1:]])
        discount = torch.cumprod(discount_arr[:-1], 0)
        actor_loss = -torch.mean(discount * returns)

        with torch.no_grad():
            value_feat = imag_feat[:-1].detach()
            value_discount = discount.detach()
            value_target = returns.detach()
        value_pred = Normal(model.value_model(value_feat), 1.0)
        value_loss = -torch.mean(value_discount * value_pred.log_prob(value_target))
        return model_loss, actor_loss, value_loss, value_pred.mean.mean().detach(), value_target.mean()

    def optimize_agent(self, buffer, train_steps, batch_b=16, batch_t=8):
        infos = []
        for _ in range(train_steps):
            observation, action, reward = buffer.sample_batch(batch_b, batch_t)
            model_loss, actor_loss, value_loss, value_mean, return_mean = self.loss(observation, action, reward)

            self.model_optimizer.zero_grad()
            self.actor_optimizer.zero_grad()
            self.value_optimizer.zero_grad()

            model_loss.backward()
            actor_loss.backward()
            value_loss.backward()

            torch.nn.utils.clip_grad_norm_(get_parameters(self.model_modules), self.grad_clip)
            torch.nn.utils.clip_grad_norm_(get_parameters(self.actor_modules), self.grad_clip)
            torch.nn.utils.clip_grad_norm_(get_parameters(self.value_modules), self.grad_clip)

            self.model_optimizer.step()
            self.actor_optimizer.step()
            self.value_optimizer.step()
            infos.append([model_loss.item(), actor_loss.item(), value_loss.item(),
                          value_mean.item(), return_mean.item()])
        return np.mean(infos, 0)


@torch.no_grad()
def collect_episode(env, model, random_policy=False):
    obs = env.reset()
    observations, actions, rewards = [], [], []
    deter, stoch = model.transition.initial_state(1)
    prev_action = torch.zeros(1, ACT_DIM)
    done = False
    while not done:
        if random_policy:
            action = np.random.uniform(-1, 1, size=ACT_DIM).astype(np.float32)
        else:
            deter, _ = model.transition.img_step(deter, stoch, prev_action)
            embed = model.observation_encoder(torch.from_numpy(obs)[None])
            stoch = model.representation(deter, embed, model.transition).mean
            action_t = model.policy(torch.cat([deter, stoch], -1), explore=True)
            prev_action = action_t
            action = action_t[0].numpy()
        observations.append(obs); actions.append(action)
        obs, reward, done = env.step(action)
        rewards.append(reward)
    return observations, actions, rewards


def main():
    env = PointMassEnv()
    model = DreamerModel()
    algo = Dreamer(model)
    buffer = ReplayBuffer()
    for _ in range(10):
        buffer.add(*collect_episode(env, model, random_policy=True))

    n_itr, train_steps = 8, 14
    for itr in range(n_itr):
        model_loss, actor_loss, value_loss, value_mean, return_mean = algo.optimize_agent(buffer, train_steps)
        ep = collect_episode(env, model)
        buffer.add(*ep)
        print(f"itr {itr:2d} | model_loss {model_loss:6.3f} | actor_loss {actor_loss:7.3f} | value_loss {value_loss:7.3f} "
              f"| value {value_mean:7.3f} lambda-return {return_mean:7.3f} | episode return {sum(ep[2]):7.2f}")


if __name__ == "__main__":
    main()
