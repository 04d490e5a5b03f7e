"""Small Transformer encoder-decoder trained to reverse digit strings. Batches come from a
tokenizer-style collate that pads to the longest sequence and returns input_ids plus an
attention_mask (1 = token, 0 = padding), the way a Hugging Face tokenizer does."""
import random
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)
random.seed(0)

PAD, BOS, EOS = 0, 1, 2
VOCAB = 13  # 3 specials + digits 0-9


class ReverseDataset(Dataset):
    def __init__(self, n):
        self.samples = []
        for _ in range(n):
            digits = [random.randint(0, 9) for _ in range(random.randint(5, 12))]
            self.samples.append(digits)

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        digits = self.samples[idx]
        src = [d + 3 for d in digits]
        tgt = [BOS] + [d + 3 for d in reversed(digits)] + [EOS]
        return src, tgt


def pad_batch(seqs):
    max_len = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), max_len), PAD, dtype=torch.long)
    attention_mask = torch.zeros((len(seqs), max_len), dtype=torch.long)
    for i, s in enumerate(seqs):
        input_ids[i, :len(s)] = torch.tensor(s)
        attention_mask[i, :len(s)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def collate(batch):
    src, tgt = zip(*batch)
    return pad_batch(src), pad_batch(tgt)


class PositionalEmbedding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, d_model)

    def forward(self, ids):
        positions = torch.arange(ids.size(1)).unsqueeze(0)
        return self.tok(ids) + self.pos(positions)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, d_model=64, nhead=4, layers=2):
        super().__init__()
        self.src_embed = PositionalEmbedding(d_model)
        self.tgt_embed = PositionalEmbedding(d_model)
        enc_layer = nn.TransformerEncoderLayer(d_model, nhead, 128, dropout=0.1, batch_first=True)
        dec_layer = nn.TransformerDecoderLayer(d_model, nhead, 128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(enc_layer, layers)
        self.decoder = nn.TransformerDecoder(dec_layer, layers)
        self.generator = nn.Linear(d_model, VOCAB)

    def forward(self, src, tgt):
        src_padding_mask = src["attention_mask"] == 0
        memory = self.encoder(self.src_embed(src["input_ids"]), src_key_padding_mask=src_padding_mask)
        embedded = self.tgt_embed(tgt["input_ids"])
        attention_mask = tgt["attention_mask"].bool()
        output = self.decoder(embedded, memory, tgt_mask=attention_mask,
                              memory_key_padding_mask=src_padding_mask)
        return self.generator(output)


train_loader = DataLoader(ReverseDataset(4000), batch_size=32, shuffle=True, collate_fn=collate)
model = Seq2SeqTransformer()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss(ignore_index=PAD)

step = 0
for epoch in range(2):
    model.train()
    for src, tgt in train_loader:
        dec_in = {k: v[:, :-1] for k, v in tgt.items()}
        labels = tgt["input_ids"][:, 1:]
        logits = model(src, dec_in)
        loss = criterion(logits.reshape(-1, VOCAB), labels.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 25 == 0:
            print(f"epoch {epoch} step {step}: loss {loss.item():.4f}")
        if step >= 200:
            break
    if step >= 200:
        break
