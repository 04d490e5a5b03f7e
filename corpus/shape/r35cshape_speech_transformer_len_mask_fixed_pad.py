"""Keyword classifier on filterbank features with a small Transformer encoder, SpeechBrain-style:
padded batches carry relative lengths (wav_lens) and the encoder builds its key padding mask from them.
Validation batches are padded to a fixed 96 frames, as for the exported model."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

n_mels, n_classes = 20, 6
FIXED_FRAMES = 96


def length_to_mask(length, max_len=None, dtype=None, device=None):
    assert len(length.shape) == 1
    if max_len is None:
        max_len = length.max().long().item()
    mask = torch.arange(max_len, device=length.device, dtype=length.dtype).expand(
        len(length), max_len) < length.unsqueeze(1)
    if dtype is None:
        dtype = length.dtype
    if device is None:
        device = length.device
    return torch.as_tensor(mask, dtype=dtype, device=device)


class Keywords(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.protos = torch.randn(n_classes, n_mels, generator=torch.Generator().manual_seed(99))
        self.items = []
        for _ in range(n):
            label = int(torch.randint(0, n_classes, (1,), generator=g))
            T = int(torch.randint(30, 80, (1,), generator=g))
            feats = 0.8 * torch.randn(T, n_mels, generator=g)
            a = int(torch.randint(0, T - 20, (1,), generator=g))
            feats[a:a + 20] += self.protos[label]
            self.items.append((feats, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def padded_collate(batch, pad_to=None):
    lengths = torch.tensor([x.shape[0] for x, _ in batch])
    T = int(lengths.max()) if pad_to is None else pad_to
    feats = torch.zeros(len(batch), T, n_mels)
    for i, (x, _) in enumerate(batch):
        feats[i, :x.shape[0]] = x
    wav_lens = lengths.float() / T
    labels = torch.tensor([y for _, y in batch])
    return feats, wav_lens, labels


class TransformerClassifier(nn.Module):
    def __init__(self, d_model=64, nhead=4, num_layers=2):
        super().__init__()
        self.proj = nn.Linear(n_mels, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.out = nn.Linear(d_model, n_classes)

    def forward(self, src, wav_len):
        abs_len = torch.round(wav_len * src.shape[1])
        src_key_padding_mask = ~length_to_mask(abs_len).bool()
        x = self.proj(src)
        x = self.encoder(x, src_key_padding_mask=src_key_padding_mask)
        keep = (~src_key_padding_mask).unsqueeze(-1).float()
        pooled = (x * keep).sum(1) / keep.sum(1)
        return self.out(pooled)


train_loader = DataLoader(Keywords(640, 1), batch_size=32, shuffle=True, collate_fn=padded_collate)
valid_loader = DataLoader(Keywords(160, 2), batch_size=32,
                          collate_fn=lambda b: padded_collate(b, pad_to=FIXED_FRAMES))

model = TransformerClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(4):
    model.train()
    total, n = 0.0, 0
    for feats, wav_lens, labels in train_loader:
        logits = model(feats, wav_lens)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
        n += 1
    print(f"epoch {epoch} train loss {total / n:.4f}")

    model.eval()
    correct, count = 0, 0
    with torch.no_grad():
        for feats, wav_lens, labels in valid_loader:
            pred = model(feats, wav_lens).argmax(1)
            correct += (pred == labels).sum().item()
            count += len(labels)
    print(f"epoch {epoch} valid acc {correct / count:.3f}")
