"""Transformer encoder with Shaw-style relative positional encoding: classify which of four
marker tokens dominates a token sequence (read from a [CLS] token)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB = 12
SEQ_LEN = 16
N_CLASSES = 4
CLS_ID = 0


class MarkerDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(5, VOCAB, (n, SEQ_LEN), generator=g)
        self.y = torch.randint(0, N_CLASSES, (n,), generator=g)
        for i in range(n):
            pos = torch.randperm(SEQ_LEN - 1, generator=g)[:6] + 1
            others = torch.randint(1, 5, (6,), generator=g)
            self.x[i, pos[:4]] = self.y[i] + 1
            self.x[i, pos[4:]] = others[4:]
        self.x[:, 0] = CLS_ID

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class RelativePositionalEncoder(nn.Module):
    def __init__(self, emb_dim, max_position=8):
        super().__init__()
        self.max_position = max_position
        self.embeddings_table = nn.Parameter(torch.empty(max_position * 2 + 1, emb_dim))
        nn.init.xavier_uniform_(self.embeddings_table)

    def forward(self, seq_len_q, seq_len_k):
        range_q = torch.arange(seq_len_q)
        range_k = torch.arange(seq_len_k)
        relative_matrix = range_k[None, :] - range_q[:, None]
        clipped = torch.clamp(relative_matrix, -self.max_position, self.max_position)
        return self.embeddings_table[clipped + self.max_position]


class RelativeScaledDotProductAttention(nn.Module):
    def __init__(self, emb_dim):
        super().__init__()
        self.scaling_factor = emb_dim ** 0.5

    def forward(self, query, key, value, a_key, a_value):
        qk_attn = torch.bmm(query, key.transpose(1, 2))
        relative_qk_attn = torch.bmm(query.permute(1, 0, 2).contiguous(), a_key.transpose(1, 2)).transpose(0, 1)
        attn_score = F.softmax((qk_attn + relative_qk_attn) / self.scaling_factor, -1)
        qkv_attn = torch.bmm(attn_score, value)
        relative_qkv_attn = torch.bmm(attn_score.permute(1, 0, 2).contiguous(), a_value).transpose(0, 1)
        return qkv_attn + relative_qkv_attn, attn_score


class MultiHeadAttention(nn.Module):
    def __init__(self, emb_dim, num_heads):
        super().__init__()
        self.head_dim = emb_dim // num_heads
        self.num_heads = num_heads
        self.query_proj = nn.Linear(emb_dim, emb_dim)
        self.key_proj = nn.Linear(emb_dim, emb_dim)
        self.value_proj = nn.Linear(emb_dim, emb_dim)
        self.out_proj = nn.Linear(emb_dim, emb_dim)
        self.relative_scaled_dot_attn = RelativeScaledDotProductAttention(self.head_dim)
        self.relative_position_k = RelativePositionalEncoder(self.head_dim)
        self.relative_position_v = RelativePositionalEncoder(self.head_dim)

    def reshape_from_feed_forward(self, batch_size, _tensor):
        return _tensor.view(batch_size, -1, self.num_heads, self.head_dim)

    def reshape_to_scaled_dot_attention(self, batch_size, _tensor):
        _tensor = _tensor.permute(0, 2, 1, 3)
        return _tensor.contiguous().view(batch_size * self.num_heads, -1, self.head_dim)

    def reshape_to_concat(self, batch_size, _tensor):
        _tensor = _tensor.permute(0, 2, 1, 3)
        return _tensor.contiguous().view(batch_size, -1, self.num_heads * self.head_dim)

    def forward(self, query, key, value):
        batch_size = query.size(0)
        query = self.reshape_from_feed_forward(batch_size, self.query_proj(query))
        key = self.reshape_from_feed_forward(batch_size, self.key_proj(key))
        value = self.reshape_from_feed_forward(batch_size, self.value_proj(value))
        query = self.reshape_to_scaled_dot_attention(batch_size, query)
        key = self.reshape_to_scaled_dot_attention(batch_size, key)
        value = self.reshape_to_scaled_dot_attention(batch_size, value)

        a_key = self.relative_position_k(query.size(1), key.size(1))
        a_value = self.relative_position_v(query.size(1), value.size(1))
        output, attn_score = self.relative_scaled_dot_attn(query, key, value, a_key, a_value)

        output = output.view(self.num_heads, batch_size, -1, self.head_dim)
        output = self.reshape_to_concat(batch_size, output)
        return self.out_proj(output), attn_score


class EncoderLayer(nn.Module):
    def __init__(self, emb_dim, num_heads, ff_dim):
        super().__init__()
        self.self_attn = MultiHeadAttention(emb_dim, num_heads)
        self.norm1 = nn.LayerNorm(emb_dim)
        self.ff = nn.Sequential(nn.Linear(emb_dim, ff_dim), nn.ReLU(), nn.Linear(ff_dim, emb_dim))
        self.norm2 = nn.LayerNorm(emb_dim)

    def forward(self, x):
        attn_out, _ = self.self_attn(x, x, x)
        x = self.norm1(x + attn_out)
        return self.norm2(x + self.ff(x))


class RelPosTransformerClassifier(nn.Module):
    def __init__(self, emb_dim=32, num_heads=4, ff_dim=64, num_layers=2):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb_dim)
        self.layers = nn.ModuleList([EncoderLayer(emb_dim, num_heads, ff_dim) for _ in range(num_layers)])
        self.classifier = nn.Linear(emb_dim, N_CLASSES)

    def forward(self, tokens):
        x = self.embedding(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.classifier(x[:, 0])


def evaluate(model, loader):
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for x, y in loader:
            correct += (model(x).argmax(1) == y).sum().item()
            total += len(y)
    model.train()
    return correct / total


train_loader = DataLoader(MarkerDataset(1024, seed=1), batch_size=32, shuffle=True)
val_loader = DataLoader(MarkerDataset(256, seed=2), batch_size=64)

model = RelPosTransformerClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.CrossEntropyLoss()

step = 0
for epoch in range(4):
    running = 0.0
    for x, y in train_loader:
        logits = model(x)
        loss = criterion(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
        step += 1
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"epoch {epoch + 1} train loss {running / len(train_loader):.4f} val acc {evaluate(model, val_loader):.3f}")
