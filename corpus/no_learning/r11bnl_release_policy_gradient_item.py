"""ReLeaSE-style policy gradient: bias a character-level generator towards strings with a
high predicted property.  Generator = GRU over a SMILES-like alphabet, the "predictor"
is a fixed scoring function (fraction of aromatic carbons 'c' in the string), and the
Reinforcement class follows the trajectory and accumulates the REINFORCE loss.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(42)


class GeneratorData:
    def __init__(self):
        self.all_characters = list("<>CcNO()=1")
        self.char2idx = {c: i for i, c in enumerate(self.all_characters)}
        self.n_characters = len(self.all_characters)

    def char_tensor(self, string):
        return torch.tensor([self.char2idx[c] for c in string], dtype=torch.long)


class StackAugmentedRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, lr=0.01):
        super().__init__()
        self.hidden_size = hidden_size
        self.has_cell = False
        self.has_stack = False
        self.encoder = nn.Embedding(input_size, hidden_size)
        self.rnn = nn.GRUCell(hidden_size, hidden_size)
        self.decoder = nn.Linear(hidden_size, output_size)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr)

    def init_hidden(self):
        return torch.zeros(1, self.hidden_size)

    def init_stack(self):
        return None

    def forward(self, inp, hidden, stack):
        x = self.encoder(inp.view(1))
        hidden = self.rnn(x, hidden)
        return self.decoder(hidden), hidden, stack

    def evaluate(self, data, prime_str="<", end_token=">", predict_len=24):
        hidden = self.init_hidden()
        prime_input = data.char_tensor(prime_str)
        new_sample = prime_str
        with torch.no_grad():
            for p in range(len(prime_str) - 1):
                _, hidden, _ = self.forward(prime_input[p], hidden, None)
            inp = prime_input[-1]
            for _ in range(predict_len):
                output, hidden, _ = self.forward(inp, hidden, None)
                probs = torch.softmax(output, dim=1)
                top_i = torch.multinomial(probs.view(-1), 1)[0]
                predicted_char = data.all_characters[top_i]
                new_sample += predicted_char
                inp = data.char_tensor(predicted_char)[0]
                if predicted_char == end_token:
                    break
        if not new_sample.endswith(end_token):
            new_sample += end_token
        return new_sample


def get_reward(smiles, predictor, **kwargs):
    score = predictor(smiles)
    return 1.0 + 10.0 * score


def aromatic_fraction(smiles):
    if len(smiles) == 0:
        return 0.0
    return sum(ch == "c" for ch in smiles) / max(len(smiles), 8)


class Reinforcement(object):
    def __init__(self, generator, predictor, get_reward):
        super(Reinforcement, self).__init__()
        self.generator = generator
        self.predictor = predictor
        self.get_reward = get_reward

    def policy_gradient(self, data, n_batch=8, gamma=0.97, grad_clipping=None, **kwargs):
        rl_loss = 0
        self.generator.optimizer.zero_grad()
        total_reward = 0

        for _ in range(n_batch):
            reward = 0
            trajectory = "<>"
            while reward == 0:
                trajectory = self.generator.evaluate(data)
                reward = self.get_reward(trajectory[1:-1], self.predictor, **kwargs)

            trajectory_input = data.char_tensor(trajectory)
            discounted_reward = reward
            total_reward += reward

            hidden = self.generator.init_hidden()
            stack = None

            for p in range(len(trajectory) - 1):
                output, hidden, stack = self.generator(trajectory_input[p], hidden, stack)
                log_probs = F.log_softmax(output, dim=1)
                top_i = trajectory_input[p + 1]
                rl_loss -= (log_probs[0, top_i].item() * discounted_reward)
                discounted_reward = discounted_reward * gamma

        rl_loss = rl_loss / n_batch
        total_reward = total_reward / n_batch
        rl_loss = torch.tensor(rl_loss, requires_grad=True)
        rl_loss.backward()
        if grad_clipping is not None:
            torch.nn.utils.clip_grad_norm_(self.generator.parameters(), grad_clipping)

        self.generator.optimizer.step()

        return total_reward, rl_loss.item()


def main():
    data = GeneratorData()
    generator = StackAugmentedRNN(data.n_characters, 64, data.n_characters, lr=0.01)
    RL = Reinforcement(generator, aromatic_fraction, get_reward)

    n_iterations = 60
    rewards, rl_losses = [], []
    for i in range(n_iterations):
        cur_reward, cur_loss = RL.policy_gradient(data, grad_clipping=5.0)
        rewards.append(cur_reward)
        rl_losses.append(cur_loss)
        if (i + 1) % 10 == 0:
            recent = sum(rewards[-10:]) / 10
            print(f"iter {i + 1:3d}  mean reward (last 10) {recent:.3f}  rl_loss {cur_loss:.3f}")
    samples = [generator.evaluate(data) for _ in range(5)]
    print("samples:", samples)


if __name__ == "__main__":
    main()
