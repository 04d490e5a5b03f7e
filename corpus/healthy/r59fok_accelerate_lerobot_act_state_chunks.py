"""Behaviour cloning of an ACT (Action Chunking Transformer) policy with accelerate, after LeRobot's
lerobot_train.py / update_policy and policies/act (state-only inputs, no camera).

Task: a 2-D "reach" robot. observation.state is the end-effector position, observation.environment_state
the goal position; the scripted expert moves along x first and then along y with a capped speed, and
records the commanded next position as the action. Each frame's target is the chunk of the next
chunk_size actions; chunks running past the end of the episode are padded with the last action and
flagged in action_is_pad, as LeRobotDataset does with delta_timestamps.
Evaluation is a closed-loop rollout: the policy's chunk goes into an action queue, n_action_steps at a time.
"""
import math
from collections import deque
from dataclasses import dataclass
from itertools import chain

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import DistributedDataParallelKwargs, set_seed
from torch import Tensor, nn

ACTION = "action"
OBS_STATE = "observation.state"
OBS_ENV_STATE = "observation.environment_state"


@dataclass
class ACTConfig:
    state_dim: int = 2
    env_state_dim: int = 2
    action_dim: int = 2
    chunk_size: int = 10
    n_action_steps: int = 10
    dim_model: int = 64
    n_heads: int = 4
    dim_feedforward: int = 128
    n_encoder_layers: int = 2
    n_decoder_layers: int = 1
    use_vae: bool = True
    latent_dim: int = 16
    n_vae_encoder_layers: int = 2
    dropout: float = 0.1
    kl_weight: float = 10.0
    pre_norm: bool = False
    optimizer_lr: float = 1e-4
    optimizer_weight_decay: float = 1e-4
    grad_clip_norm: float = 10.0


# ----------------------------------------------------------------------------- data
EP_LEN, MAX_STEP, SUCCESS_RADIUS = 40, 0.06, 0.05


def expert_action(pos, goal):
    step = np.zeros(2)
    dx, dy = goal[0] - pos[0], goal[1] - pos[1]
    if abs(dx) > 1e-3:
        step[0] = np.clip(dx, -MAX_STEP, MAX_STEP)
    else:
        step[1] = np.clip(dy, -MAX_STEP, MAX_STEP)
    return pos + step


def record_episodes(n_episodes, rng):
    frames = []
    for ep in range(n_episodes):
        pos, goal = rng.uniform(0.05, 0.95, 2), rng.uniform(0.05, 0.95, 2)
        for t in range(EP_LEN):
            act = expert_action(pos, goal)
            frames.append(dict(episode_index=ep, frame_index=t, state=pos.copy(), env_state=goal.copy(), action=act))
            pos = act + rng.normal(0.0, 0.003, 2)
    return frames


class ReachDataset(torch.utils.data.Dataset):
    def __init__(self, frames, chunk_size):
        self.state = torch.tensor(np.stack([f["state"] for f in frames]), dtype=torch.float32)
        self.env_state = torch.tensor(np.stack([f["env_state"] for f in frames]), dtype=torch.float32)
        self.action = torch.tensor(np.stack([f["action"] for f in frames]), dtype=torch.float32)
        ep = torch.tensor([f["episode_index"] for f in frames])
        self.ep_to = {int(e): int((ep == e).nonzero().max()) for e in ep.unique()}
        self.ep = ep
        self.chunk_size = chunk_size
        self.num_frames, self.num_episodes = len(frames), len(self.ep_to)
        self.stats = {
            OBS_STATE: {"mean": self.state.mean(0), "std": self.state.std(0)},
            OBS_ENV_STATE: {"mean": self.env_state.mean(0), "std": self.env_state.std(0)},
            ACTION: {"mean": self.action.mean(0), "std": self.action.std(0)},
        }

    def __len__(self):
        return self.num_frames

    def __getitem__(self, idx):
        last = self.ep_to[int(self.ep[idx])]
        query = torch.arange(idx, idx + self.chunk_size)
        action_is_pad = query > last
        query = query.clamp(max=last)
        return {
            OBS_STATE: self.state[idx],
            OBS_ENV_STATE: self.env_state[idx],
            ACTION: self.action[query],
            "action_is_pad": action_is_pad,
        }


# ----------------------------------------------------------------------------- policy
class Normalize(nn.Module):
    def __init__(self, keys, stats):
        super().__init__()
        self.keys = keys
        for k in keys:
            self.register_buffer(k.replace(".", "_") + "_mean", stats[k]["mean"].clone())
            self.register_buffer(k.replace(".", "_") + "_std", stats[k]["std"].clone())

    def forward(self, batch):
        batch = dict(batch)
        for k in self.keys:
            if k in batch:
                mean, std = getattr(self, k.replace(".", "_") + "_mean"), getattr(self, k.replace(".", "_") + "_std")
                batch[k] = (batch[k] - mean) / (std + 1e-8)
        return batch


class Unnormalize(Normalize):
    def forward(self, batch):
        batch = dict(batch)
        for k in self.keys:
            if k in batch:
                mean, std = getattr(self, k.replace(".", "_") + "_mean"), getattr(self, k.replace(".", "_") + "_std")
                batch[k] = batch[k] * std + mean
        return batch


def create_sinusoidal_pos_embedding(num_positions, dimension):
    def get_position_angle_vec(position):
        return [position / np.power(10000, 2 * (hid_j // 2) / dimension) for hid_j in range(dimension)]

    sinusoid_table = np.array([get_position_angle_vec(pos_i) for pos_i in range(num_positions)])
    sinusoid_table[:, 0::2] = np.sin(sinusoid_table[:, 0::2])
    sinusoid_table[:, 1::2] = np.cos(sinusoid_table[:, 1::2])
    return torch.from_numpy(sinusoid_table).float()


class ACTEncoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.linear1 = nn.Linear(config.dim_model, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, config.dim_model)
        self.norm1 = nn.LayerNorm(config.dim_model)
        self.norm2 = nn.LayerNorm(config.dim_model)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.pre_norm = config.pre_norm

    def forward(self, x, pos_embed=None, key_padding_mask=None):
        skip = x
        if self.pre_norm:
            x = self.norm1(x)
        q = k = x if pos_embed is None else x + pos_embed
        x = self.self_attn(q, k, value=x, key_padding_mask=key_padding_mask)[0]
        x = skip + self.dropout1(x)
        if self.pre_norm:
            skip = x
            x = self.norm2(x)
        else:
            x = self.norm1(x)
            skip = x
        x = self.linear2(self.dropout(F.relu(self.linear1(x))))
        x = skip + self.dropout2(x)
        if not self.pre_norm:
            x = self.norm2(x)
        return x


class ACTEncoder(nn.Module):
    def __init__(self, config, is_vae_encoder=False):
        super().__init__()
        num_layers = config.n_vae_encoder_layers if is_vae_encoder else config.n_encoder_layers
        self.layers = nn.ModuleList([ACTEncoderLayer(config) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(config.dim_model) if config.pre_norm else nn.Identity()

    def forward(self, x, pos_embed=None, key_padding_mask=None):
        for layer in self.layers:
            x = layer(x, pos_embed=pos_embed, key_padding_mask=key_padding_mask)
        return self.norm(x)


class ACTDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.multihead_attn = nn.MultiheadAttention(config.dim_model, config.n_heads, dropout=config.dropout)
        self.linear1 = nn.Linear(config.dim_model, config.dim_feedforward)
        self.dropout = nn.Dropout(config.dropout)
        self.linear2 = nn.Linear(config.dim_feedforward, config.dim_model)
        self.norm1 = nn.LayerNorm(config.dim_model)
        self.norm2 = nn.LayerNorm(config.dim_model)
        self.norm3 = nn.LayerNorm(config.dim_model)
        self.dropout1 = nn.Dropout(config.dropout)
        self.dropout2 = nn.Dropout(config.dropout)
        self.dropout3 = nn.Dropout(config.dropout)

    def forward(self, x, encoder_out, decoder_pos_embed=None, encoder_pos_embed=None):
        skip = x
        q = k = x + decoder_pos_embed
        x = self.self_attn(q, k, value=x)[0]
        x = skip + self.dropout1(x)
        x = self.norm1(x)
        skip = x
        x = self.multihead_attn(query=x + decoder_pos_embed, key=encoder_out + encoder_pos_embed, value=encoder_out)[0]
        x = skip + self.dropout2(x)
        x = self.norm2(x)
        skip = x
        x = self.linear2(self.dropout(F.relu(self.linear1(x))))
        x = skip + self.dropout3(x)
        return self.norm3(x)


class ACTDecoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([ACTDecoderLayer(config) for _ in range(config.n_decoder_layers)])
        self.norm = nn.LayerNorm(config.dim_model)

    def forward(self, x, encoder_out, decoder_pos_embed=None, encoder_pos_embed=None):
        for layer in self.layers:
            x = layer(x, encoder_out, decoder_pos_embed=decoder_pos_embed, encoder_pos_embed=encoder_pos_embed)
        return self.norm(x)


class ACT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.vae_encoder = ACTEncoder(config, is_vae_encoder=True)
        self.vae_encoder_cls_embed = nn.Embedding(1, config.dim_model)
        self.vae_encoder_robot_state_input_proj = nn.Linear(config.state_dim, config.dim_model)
        self.vae_encoder_action_input_proj = nn.Linear(config.action_dim, config.dim_model)
        self.vae_encoder_latent_output_proj = nn.Linear(config.dim_model, config.latent_dim * 2)
        self.register_buffer(
            "vae_encoder_pos_enc",
            create_sinusoidal_pos_embedding(2 + config.chunk_size, config.dim_model).unsqueeze(0),
        )
        self.encoder = ACTEncoder(config)
        self.decoder = ACTDecoder(config)
        self.encoder_robot_state_input_proj = nn.Linear(config.state_dim, config.dim_model)
        self.encoder_env_state_input_proj = nn.Linear(config.env_state_dim, config.dim_model)
        self.encoder_latent_input_proj = nn.Linear(config.latent_dim, config.dim_model)
        self.encoder_1d_feature_pos_embed = nn.Embedding(3, config.dim_model)
        self.decoder_pos_embed = nn.Embedding(config.chunk_size, config.dim_model)
        self.action_head = nn.Linear(config.dim_model, config.action_dim)
        for p in chain(self.encoder.parameters(), self.decoder.parameters()):
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, batch):
        batch_size = batch[OBS_ENV_STATE].shape[0]
        if self.config.use_vae and ACTION in batch and self.training:
            cls_embed = self.vae_encoder_cls_embed.weight.unsqueeze(0).expand(batch_size, -1, -1)
            robot_state_embed = self.vae_encoder_robot_state_input_proj(batch[OBS_STATE]).unsqueeze(1)
            action_embed = self.vae_encoder_action_input_proj(batch[ACTION])
            vae_encoder_input = torch.cat([cls_embed, robot_state_embed, action_embed], axis=1)
            pos_embed = self.vae_encoder_pos_enc.clone().detach()
            cls_joint_is_pad = torch.full((batch_size, 2), False, device=batch[OBS_STATE].device)
            key_padding_mask = torch.cat([cls_joint_is_pad, batch["action_is_pad"]], axis=1)
            cls_token_out = self.vae_encoder(
                vae_encoder_input.permute(1, 0, 2), pos_embed=pos_embed.permute(1, 0, 2), key_padding_mask=key_padding_mask
            )[0]
            latent_pdf_params = self.vae_encoder_latent_output_proj(cls_token_out)
            mu = latent_pdf_params[:, : self.config.latent_dim]
            log_sigma_x2 = latent_pdf_params[:, self.config.latent_dim:]
            latent_sample = mu + log_sigma_x2.div(2).exp() * torch.randn_like(mu)
        else:
            mu = log_sigma_x2 = None
            latent_sample = torch.zeros([batch_size, self.config.latent_dim], device=batch[OBS_STATE].device)

        encoder_in_tokens = torch.stack([
            self.encoder_latent_input_proj(latent_sample),
            self.encoder_robot_state_input_proj(batch[OBS_STATE]),
            self.encoder_env_state_input_proj(batch[OBS_ENV_STATE]),
        ], axis=0)
        encoder_in_pos_embed = self.encoder_1d_feature_pos_embed.weight.unsqueeze(1)
        encoder_out = self.encoder(encoder_in_tokens, pos_embed=encoder_in_pos_embed)
        decoder_in = torch.zeros((self.config.chunk_size, batch_size, self.config.dim_model), device=encoder_out.device)
        decoder_out = self.decoder(
            decoder_in, encoder_out, encoder_pos_embed=encoder_in_pos_embed,
            decoder_pos_embed=self.decoder_pos_embed.weight.unsqueeze(1),
        )
        actions = self.action_head(decoder_out.transpose(0, 1))
        return actions, (mu, log_sigma_x2)


class ACTPolicy(nn.Module):
    def __init__(self, config, dataset_stats):
        super().__init__()
        self.config = config
        self.normalize_inputs = Normalize([OBS_STATE, OBS_ENV_STATE], dataset_stats)
        self.normalize_targets = Normalize([ACTION], dataset_stats)
        self.unnormalize_outputs = Unnormalize([ACTION], dataset_stats)
        self.model = ACT(config)
        self.reset()

    def get_optim_params(self):
        return [p for p in self.parameters() if p.requires_grad]

    def reset(self):
        self._action_queue = deque([], maxlen=self.config.n_action_steps)

    @torch.no_grad()
    def select_action(self, batch):
        self.eval()
        if len(self._action_queue) == 0:
            actions = self.predict_action_chunk(batch)[:, : self.config.n_action_steps]
            self._action_queue.extend(actions.transpose(0, 1))
        return self._action_queue.popleft()

    @torch.no_grad()
    def predict_action_chunk(self, batch):
        self.eval()
        batch = self.normalize_inputs(batch)
        actions = self.model(batch)[0]
        return self.unnormalize_outputs({ACTION: actions})[ACTION]

    def forward(self, batch):
        batch = self.normalize_inputs(batch)
        batch = self.normalize_targets(batch)
        actions_hat, (mu_hat, log_sigma_x2_hat) = self.model(batch)
        l1_loss = (
            F.l1_loss(batch[ACTION], actions_hat, reduction="none") * ~batch["action_is_pad"].unsqueeze(-1)
        ).mean()
        loss_dict = {"l1_loss": l1_loss.item()}
        mean_kld = (-0.5 * (1 + log_sigma_x2_hat - mu_hat.pow(2) - log_sigma_x2_hat.exp())).sum(-1).mean()
        loss_dict["kld_loss"] = mean_kld.item()
        loss = l1_loss + mean_kld * self.config.kl_weight
        return loss, loss_dict


# ----------------------------------------------------------------------------- train / eval
def update_policy(policy, batch, optimizer, grad_clip_norm, accelerator, lr_scheduler=None):
    policy.train()
    with accelerator.autocast():
        loss, output_dict = policy.forward(batch)
    accelerator.backward(loss)
    grad_norm = accelerator.clip_grad_norm_(policy.parameters(), grad_clip_norm)
    optimizer.step()
    optimizer.zero_grad()
    if lr_scheduler is not None:
        lr_scheduler.step()
    return loss.item(), grad_norm.item(), output_dict


def eval_policy(policy, n_episodes=50, seed=10_000):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0.05, 0.95, (n_episodes, 2))
    goal = rng.uniform(0.05, 0.95, (n_episodes, 2))
    policy.reset()
    for _ in range(EP_LEN):
        obs = {OBS_STATE: torch.tensor(pos, dtype=torch.float32), OBS_ENV_STATE: torch.tensor(goal, dtype=torch.float32)}
        action = policy.select_action(obs).numpy()
        delta = np.clip(action - pos, -MAX_STEP, MAX_STEP)
        pos = pos + delta + rng.normal(0.0, 0.003, pos.shape)
    dist = np.linalg.norm(pos - goal, axis=1)
    return float((dist < SUCCESS_RADIUS).mean()), float(dist.mean())


def cycle(iterable):
    while True:
        for x in iterable:
            yield x


def train():
    cfg = ACTConfig()
    steps, batch_size, log_freq, eval_freq = 200, 32, 25, 50
    ddp_kwargs = DistributedDataParallelKwargs(find_unused_parameters=True)
    accelerator = Accelerator(step_scheduler_with_optimizer=False, kwargs_handlers=[ddp_kwargs], cpu=True)
    set_seed(1000)

    dataset = ReachDataset(record_episodes(60, np.random.default_rng(0)), cfg.chunk_size)
    policy = ACTPolicy(cfg, dataset_stats=dataset.stats)
    optimizer = torch.optim.AdamW(policy.get_optim_params(), lr=cfg.optimizer_lr,
                                  weight_decay=cfg.optimizer_weight_decay)
    lr_scheduler = None
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=False)

    num_learnable_params = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    accelerator.print(f"dataset.num_frames={dataset.num_frames} dataset.num_episodes={dataset.num_episodes} "
                      f"num_learnable_params={num_learnable_params}")

    policy, optimizer, dataloader = accelerator.prepare(policy, optimizer, dataloader)
    dl_iter = cycle(dataloader)

    success, mean_dist = eval_policy(accelerator.unwrap_model(policy))
    accelerator.print(f"step 0 eval: pc_success {100 * success:.1f}%  final distance {mean_dist:.3f}")
    loss_meter, l1_meter = [], []
    for step in range(1, steps + 1):
        batch = next(dl_iter)
        loss, grad_norm, output_dict = update_policy(policy, batch, optimizer, cfg.grad_clip_norm, accelerator,
                                                     lr_scheduler=lr_scheduler)
        loss_meter.append(loss)
        l1_meter.append(output_dict["l1_loss"])
        if step % log_freq == 0:
            accelerator.print(f"step:{step} loss:{np.mean(loss_meter):.3f} l1:{np.mean(l1_meter):.3f} "
                              f"kld:{output_dict['kld_loss']:.3f} grdn:{grad_norm:.3f} "
                              f"lr:{optimizer.param_groups[0]['lr']:.1e}")
            loss_meter, l1_meter = [], []
        if step % eval_freq == 0:
            success, mean_dist = eval_policy(accelerator.unwrap_model(policy))
            accelerator.print(f"step {step} eval: pc_success {100 * success:.1f}%  final distance {mean_dist:.3f}")
    accelerator.end_training()


if __name__ == "__main__":
    train()
