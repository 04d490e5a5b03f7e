"""Image captioning from bottom-up region features (36 regions per image).

An attention LSTM decoder (Show-Attend-Tell style) over the embedded region
features, trained with teacher forcing and cross-entropy on synthetic
"detected object" captions.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

NUM_REGIONS = 36
ATT_FEAT_SIZE = 512
NUM_OBJECTS = 12
PAD, BOS, EOS = 0, 1, 2
VOCAB = 3 + NUM_OBJECTS
SEQ_LEN = 5


class RegionCaptions(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        protos = torch.randn(NUM_OBJECTS, ATT_FEAT_SIZE, generator=torch.Generator().manual_seed(99))
        self.att_feats = torch.randn(n, NUM_REGIONS, ATT_FEAT_SIZE, generator=g) * 0.5 + 0.5
        self.captions = torch.full((n, SEQ_LEN), PAD, dtype=torch.long)
        for i in range(n):
            objs = torch.randperm(NUM_OBJECTS, generator=g)[:3].sort().values
            regions = torch.randperm(NUM_REGIONS, generator=g)[:3]
            self.att_feats[i, regions] += 1.5 * protos[objs]
            self.captions[i] = torch.tensor([BOS, *(objs + 3).tolist(), EOS])

    def __len__(self):
        return len(self.captions)

    def __getitem__(self, idx):
        return self.att_feats[idx], self.captions[idx]


class AttCaptionModel(nn.Module):
    def __init__(self, att_feat_size=ATT_FEAT_SIZE, rnn_size=128, drop_prob_lm=0.3):
        super().__init__()
        self.att_embed = nn.Sequential(
            nn.BatchNorm1d(att_feat_size),
            nn.Linear(att_feat_size, rnn_size),
            nn.ReLU(),
            nn.Dropout(drop_prob_lm),
        )
        self.embed = nn.Embedding(VOCAB, rnn_size)
        self.ctx2att = nn.Linear(rnn_size, rnn_size)
        self.h2att = nn.Linear(rnn_size, rnn_size)
        self.alpha_net = nn.Linear(rnn_size, 1)
        self.lstm = nn.LSTMCell(2 * rnn_size, rnn_size)
        self.logit = nn.Linear(rnn_size, VOCAB)
        self.rnn_size = rnn_size

    def forward(self, att_feats, seq):
        batch_size = att_feats.size(0)
        att_feats = self.att_embed(att_feats)
        p_att = self.ctx2att(att_feats)
        h = att_feats.new_zeros(batch_size, self.rnn_size)
        c = att_feats.new_zeros(batch_size, self.rnn_size)
        outputs = []
        for t in range(seq.size(1) - 1):
            xt = self.embed(seq[:, t])
            e = self.alpha_net(torch.tanh(p_att + self.h2att(h).unsqueeze(1))).squeeze(2)
            weight = F.softmax(e, dim=1)
            att_res = torch.bmm(weight.unsqueeze(1), att_feats).squeeze(1)
            h, c = self.lstm(torch.cat([xt, att_res], 1), (h, c))
            outputs.append(self.logit(h))
        return torch.stack(outputs, 1)


train_loader = DataLoader(RegionCaptions(1024, 1), batch_size=32, shuffle=True)
val_set = RegionCaptions(256, 2)
model = AttCaptionModel()
optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)

for epoch in range(1, 5):
    model.train()
    total = 0.0
    for att_feats, captions in train_loader:
        optimizer.zero_grad()
        logits = model(att_feats, captions)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), captions[:, 1:].reshape(-1), ignore_index=PAD)
        loss.backward()
        optimizer.step()
        total += loss.item()
    model.eval()
    with torch.no_grad():
        logits = model(val_set.att_feats, val_set.captions)
        word_acc = (logits.argmax(-1) == val_set.captions[:, 1:]).float().mean().item()
    print(f"epoch {epoch}: train loss {total / len(train_loader):.4f}  val word acc {word_acc:.3f}")
