"""Intent classifier: tune only the top encoder layer on cached lower-layer hidden states.

A small "pretrained" transformer encoder embeds the utterances; to save compute, the
hidden states after the lower layers are computed once for the whole training set and
kept in a list, then only the last layer and the classification head are trained on them
(passed back in as inputs_embeds).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

VOCAB = 2000
SEQ_LEN = 64
D_MODEL = 128
N_CLASSES = 6


def make_utterances(n, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    ids = torch.randint(10, VOCAB, (n, SEQ_LEN), generator=g)
    keyword_pos = torch.randint(0, SEQ_LEN, (n, 4), generator=g)
    ids.scatter_(1, keyword_pos, (y + 1)[:, None].expand(-1, 4))
    mask = torch.ones(n, SEQ_LEN, dtype=torch.bool)
    return TensorDataset(ids, mask, y)


class Encoder(nn.Module):
    def __init__(self, n_layers=4):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.randn(1, SEQ_LEN, D_MODEL) * 0.02)
        self.layer = nn.ModuleList([
            nn.TransformerEncoderLayer(D_MODEL, 4, 512, dropout=0.1, batch_first=True)
            for _ in range(n_layers)])

    def forward(self, input_ids=None, inputs_embeds=None, first=0):
        x = inputs_embeds if inputs_embeds is not None else self.embed(input_ids) + self.pos
        for layer in self.layer[first:]:
            x = layer(x)
        return x


class Net(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.classifier = nn.Sequential(nn.Linear(D_MODEL, 64), nn.ReLU(), nn.Linear(64, N_CLASSES))

    def forward(self, hidden_state):
        out = self.encoder(inputs_embeds=hidden_state, first=3)
        return self.classifier(out.mean(dim=1))


encoder = Encoder()
lower = encoder.layer[:3]
train_loader = DataLoader(make_utterances(512, 1), batch_size=16, shuffle=False)

hidden_states_list = []
labels_list = []
for step, (ids, mask, y) in enumerate(train_loader):
    hidden_states = encoder.embed(ids) + encoder.pos
    for layer in lower:
        hidden_states = layer(hidden_states)
    hidden_states_list.append(hidden_states)
    labels_list.append(y)
    if step % 4 == 0:
        print(f"cached batch {step}, {len(hidden_states_list) * 16} utterances", flush=True)

model = Net(encoder)
params = list(encoder.layer[3].parameters()) + list(model.classifier.parameters())
optimizer = torch.optim.AdamW(params, lr=5e-4)

for epoch in range(3):
    total, correct, running = 0, 0, 0.0
    for hidden_state, y in zip(hidden_states_list, labels_list):
        logits = model(hidden_state.detach())
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        correct += (logits.argmax(1) == y).sum().item()
        total += y.numel()
    print(f"epoch {epoch} loss {running / len(hidden_states_list):.4f} acc {correct / total:.3f}", flush=True)
