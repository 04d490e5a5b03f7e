"""Teacher-student distillation for a blind locomotion-style policy.

The teacher sees the privileged terrain/command vector directly; the recurrent
student only sees it in the first observation of each episode (afterwards just
noisy proprioception) and has to keep it in its LSTM memory.  The student is
trained by behaviour cloning on the teacher's actions (rsl_rl Distillation style).
"""
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)

NUM_ENVS = 64
EPISODE_LEN = 16
NUM_PRIV = 4
NUM_PROPRIO = 4
NUM_ACTIONS = 2


def mlp(in_dim, hidden_dims, out_dim):
    layers = [nn.Linear(in_dim, hidden_dims[0]), nn.ELU()]
    for a, b in zip(hidden_dims[:-1], hidden_dims[1:]):
        layers += [nn.Linear(a, b), nn.ELU()]
    layers.append(nn.Linear(hidden_dims[-1], out_dim))
    return nn.Sequential(*layers)


class Memory(nn.Module):
    def __init__(self, input_size, hidden_size=64):
        super().__init__()
        self.rnn = nn.LSTM(input_size=input_size, hidden_size=hidden_size)
        self.hidden_states = None

    def forward(self, x):
        out, self.hidden_states = self.rnn(x.unsqueeze(0), self.hidden_states)
        return out.squeeze(0)

    def reset(self):
        self.hidden_states = None

    def detach_hidden_states(self):
        if self.hidden_states is not None:
            self.hidden_states = tuple(h.detach() for h in self.hidden_states)


class StudentTeacherRecurrent(nn.Module):
    def __init__(self, num_student_obs, num_teacher_obs, num_actions, rnn_hidden_dim=64):
        super().__init__()
        self.memory_s = Memory(num_student_obs, hidden_size=rnn_hidden_dim)
        self.student = mlp(rnn_hidden_dim, [64, 64], num_actions)
        self.teacher = mlp(num_teacher_obs, [32, 32], num_actions)
        self.teacher.eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)

    def reset(self):
        self.memory_s.reset()

    def act_inference(self, obs):
        return self.student(self.memory_s(obs))

    def evaluate(self, teacher_obs):
        with torch.no_grad():
            return self.teacher(teacher_obs)

    def detach_hidden_states(self):
        self.memory_s.detach_hidden_states()


class BlindTerrainEnv:
    """Privileged vector is shown to the student only at t == 0."""

    def __init__(self, num_envs, generator):
        self.num_envs = num_envs
        self.g = generator
        self.t = 0
        self.priv = None

    def reset(self):
        self.t = 0
        self.priv = torch.randn(self.num_envs, NUM_PRIV, generator=self.g)
        return self._obs()

    def _obs(self):
        proprio = 0.3 * torch.randn(self.num_envs, NUM_PROPRIO, generator=self.g)
        first = torch.full((self.num_envs, 1), float(self.t == 0))
        cue = self.priv * first
        student_obs = torch.cat([cue, proprio, first], dim=1)
        teacher_obs = self.priv
        return student_obs, teacher_obs

    def step(self):
        self.t += 1
        return self._obs()


class Distillation:
    def __init__(self, policy, learning_rate=1e-3, gradient_length=EPISODE_LEN, max_grad_norm=None):
        self.policy = policy
        self.optimizer = optim.Adam(self.policy.student.parameters(), lr=learning_rate)
        self.gradient_length = gradient_length
        self.max_grad_norm = max_grad_norm
        self.loss_fn = nn.functional.mse_loss

    def update(self, env):
        self.policy.reset()
        obs, teacher_obs = env.reset()
        loss = 0
        mean_behavior_loss = 0.0
        for cnt in range(1, EPISODE_LEN + 1):
            actions = self.policy.act_inference(obs)
            privileged_actions = self.policy.evaluate(teacher_obs)
            behavior_loss = self.loss_fn(actions, privileged_actions)
            loss = loss + behavior_loss
            mean_behavior_loss += behavior_loss.item()
            if cnt % self.gradient_length == 0:
                self.optimizer.zero_grad()
                loss.backward()
                if self.max_grad_norm:
                    nn.utils.clip_grad_norm_(self.policy.student.parameters(), self.max_grad_norm)
                self.optimizer.step()
                self.policy.detach_hidden_states()
                loss = 0
            obs, teacher_obs = env.step()
        return mean_behavior_loss / EPISODE_LEN


def load_teacher(policy, generator):
    """Stand-in for loading the trained teacher checkpoint."""
    state = {}
    for name, p in policy.teacher.state_dict().items():
        if name.endswith("weight"):
            state[name] = torch.randn(p.shape, generator=generator) * (2.0 / p.shape[1]) ** 0.5
        else:
            state[name] = 0.1 * torch.randn(p.shape, generator=generator)
    policy.teacher.load_state_dict(state)
    policy.teacher.eval()


def main():
    g = torch.Generator().manual_seed(1)
    env = BlindTerrainEnv(NUM_ENVS, g)
    num_student_obs = NUM_PRIV + NUM_PROPRIO + 1
    policy = StudentTeacherRecurrent(num_student_obs, NUM_PRIV, NUM_ACTIONS)
    load_teacher(policy, g)
    algo = Distillation(policy, learning_rate=1e-3)

    # scale of the teacher's actions, for reference
    with torch.no_grad():
        ref = policy.evaluate(torch.randn(4096, NUM_PRIV, generator=g))
        print(f"teacher action variance: {ref.var(dim=0).mean().item():.4f}")

    num_iterations = 200
    running = 0.0
    for it in range(1, num_iterations + 1):
        running += algo.update(env)
        if it % 20 == 0:
            print(f"iteration {it:4d}  behavior loss {running / 20:.4f}")
            running = 0.0


if __name__ == "__main__":
    main()
