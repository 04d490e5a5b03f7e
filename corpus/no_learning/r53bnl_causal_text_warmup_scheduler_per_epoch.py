"""CausalBERT-style text model: a small transformer encoder reads a document and predicts the
propensity g = P(T=1 | text) and the outcomes Q0, Q1 = P(Y=1 | T, text), trained jointly with
AdamW and a linear warm-up/decay schedule (10% warm-up)."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB, SEQ_LEN, N_DOCS = 200, 24, 2048
BATCH_SIZE, EPOCHS, LR = 32, 3, 1e-3


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class ReviewsDataset(Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(1)
        self.tokens = torch.randint(4, VOCAB, (n, SEQ_LEN), generator=g)
        topic = torch.rand(n, generator=g) < 0.5
        conf = torch.rand(n, generator=g) < 0.5
        self.tokens[topic, :4] = 1
        self.tokens[conf, 4:8] = 2
        self.tokens[:, 0] = 3
        p_t = torch.where(conf, 0.8, 0.2)
        self.treatment = (torch.rand(n, generator=g) < p_t).float()
        logit_y = -2.5 + 4.0 * topic.float() + 1.0 * self.treatment + 0.5 * conf.float()
        self.outcome = (torch.rand(n, generator=g) < torch.sigmoid(logit_y)).float()

    def __len__(self):
        return len(self.outcome)

    def __getitem__(self, i):
        return self.tokens[i], self.treatment[i], self.outcome[i]


class CausalTextModel(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(1, SEQ_LEN, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1)
        self.g_head = nn.Linear(d_model, 1)
        self.Q_cls = nn.ModuleDict({'0': nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(), nn.Linear(64, 1)),
                                    '1': nn.Sequential(nn.Linear(d_model, 64), nn.ReLU(), nn.Linear(64, 1))})

    def forward(self, tokens, treatment):
        h = self.encoder(self.embed(tokens) + self.pos)
        pooled = h[:, 0]
        g_logit = self.g_head(pooled).squeeze(-1)
        q0 = self.Q_cls['0'](pooled).squeeze(-1)
        q1 = self.Q_cls['1'](pooled).squeeze(-1)
        q_logit = torch.where(treatment > 0.5, q1, q0)
        return g_logit, q_logit


dataset = ReviewsDataset(N_DOCS)
dataloader = DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True)
model = CausalTextModel()
optimizer = torch.optim.AdamW(model.parameters(), lr=LR, eps=1e-8)
total_steps = len(dataloader) * EPOCHS
warmup_steps = int(0.1 * total_steps)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=warmup_steps, num_training_steps=total_steps)

for epoch in range(EPOCHS):
    model.train()
    losses, correct, n = [], 0, 0
    for step, (tokens, T, Y) in enumerate(dataloader):
        optimizer.zero_grad()
        g_logit, q_logit = model(tokens, T)
        g_loss = F.binary_cross_entropy_with_logits(g_logit, T)
        Q_loss = F.binary_cross_entropy_with_logits(q_logit, Y)
        loss = 0.1 * g_loss + 0.1 * Q_loss
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().item())
        correct += ((q_logit > 0).float() == Y).sum().item()
        n += len(Y)
        if step % 16 == 0:
            print(f"epoch {epoch} step {step:3d} lr {optimizer.param_groups[0]['lr']:.2e} "
                  f"g_loss {g_loss.item():.4f} Q_loss {Q_loss.item():.4f}")
    scheduler.step()
    print(f"epoch {epoch}: mean loss {sum(losses) / len(losses):.4f}, outcome acc {100.0 * correct / n:.1f}%")
