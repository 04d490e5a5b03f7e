"""Multimodal emotion recognition on CMU-MOSEI-style data: an early-fusion bidirectional LSTM
baseline over word-aligned text (GloVe), audio (COVAREP) and vision (Facet) features, predicting
the six emotions (anger, disgust, fear, happy, sad, surprise).

The features here are synthetic stand-ins with the same layout as the aligned SDK pickles
(utterances of 20 aligned steps); each utterance carries emotion intensities in [0, 3] that are
turned into presence labels, several of which can be on at once.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

EMOTIONS = ["anger", "disgust", "fear", "happy", "sad", "surprise"]
SEQ_LEN, TEXT_DIM, AUDIO_DIM, VISION_DIM = 20, 50, 74, 35


proto_rng = np.random.default_rng(1234)
emo_text = proto_rng.normal(0, 1, size=(len(EMOTIONS), TEXT_DIM))
emo_audio = proto_rng.normal(0, 1, size=(len(EMOTIONS), AUDIO_DIM))
emo_vision = proto_rng.normal(0, 1, size=(len(EMOTIONS), VISION_DIM))


def make_split(n, rng):
    intensity = rng.uniform(0, 3, size=(n, len(EMOTIONS))) * (rng.random((n, len(EMOTIONS))) < 0.3)
    weights = intensity[:, None, :] * rng.uniform(0.5, 1.0, size=(n, SEQ_LEN, 1))
    text = weights @ emo_text + rng.normal(0, 1.0, size=(n, SEQ_LEN, TEXT_DIM))
    audio = weights @ emo_audio + rng.normal(0, 1.5, size=(n, SEQ_LEN, AUDIO_DIM))
    vision = weights @ emo_vision + rng.normal(0, 1.5, size=(n, SEQ_LEN, VISION_DIM))
    ids = [f"utt{i:05d}" for i in range(n)]
    return ids, text, audio, vision, intensity


class MOSEI(Dataset):
    def __init__(self, id, text, audio, vision, labels):
        super().__init__()
        self.vision = torch.tensor(vision, dtype=torch.float32)
        self.labels = torch.tensor(labels)
        self.text = torch.tensor(text, dtype=torch.float32)
        self.audio = torch.tensor(audio, dtype=torch.float32)
        self.id = list(id)

    def __len__(self):
        return len(self.id)

    def __getitem__(self, index):
        return (self.text[index], self.audio[index], self.vision[index]), self.labels[index], self.id[index]


def get_dataset(n, seed):
    rng = np.random.default_rng(seed)
    ids, text, audio, vision, intensity = make_split(n, rng)
    labels = (intensity > 0).astype(np.int64)
    return MOSEI(ids, text, audio, vision, labels)


class EF_RNN(nn.Module):
    def __init__(self, num_classes, input_sizes, hidden_size=64, num_layers=2, dropout=0.15, bidirectional=True):
        super().__init__()
        self.num_classes = num_classes
        self.rnn = nn.LSTM(sum(input_sizes), hidden_size, num_layers=num_layers, dropout=dropout,
                           bidirectional=bidirectional, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden_size * (2 if bidirectional else 1), num_classes)

    def forward(self, X_text, X_audio, X_vision):
        x = torch.cat([X_text, X_audio, X_vision], dim=-1)
        output, _ = self.rnn(x)
        h = self.dropout(output[:, -1, :])
        return self.out(h)


def eval_mosei_emo(logits, Y, threshold=0.5):
    preds = (torch.sigmoid(logits) > threshold).long()
    truth = Y.long()
    accs = [(preds[:, i] == truth[:, i]).float().mean().item() for i in range(len(EMOTIONS))]
    f1s = []
    for i in range(len(EMOTIONS)):
        tp = ((preds[:, i] == 1) & (truth[:, i] == 1)).sum().item()
        fp = ((preds[:, i] == 1) & (truth[:, i] == 0)).sum().item()
        fn = ((preds[:, i] == 0) & (truth[:, i] == 1)).sum().item()
        f1s.append(2 * tp / max(2 * tp + fp + fn, 1))
    return accs, f1s


train_data = get_dataset(1200, seed=1)
valid_data = get_dataset(300, seed=2)
dataloaders = {
    "train": DataLoader(train_data, batch_size=64, shuffle=True),
    "valid": DataLoader(valid_data, batch_size=64, shuffle=False),
}

model = EF_RNN(num_classes=len(EMOTIONS), input_sizes=[TEXT_DIM, AUDIO_DIM, VISION_DIM])
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
args = {"clip": 1.0, "epochs": 8, "threshold": 0.5}


def train_one_epoch():
    model.train()
    dataloader = dataloaders["train"]
    epoch_loss = 0.0
    total_logits, total_Y = [], []
    for X, Y, META in dataloader:
        X_text, X_audio, X_vision = X
        Y = Y.squeeze()
        optimizer.zero_grad()
        logits = model(X_text, X_audio, X_vision)
        loss = criterion(logits, Y)
        loss.backward()
        epoch_loss += loss.item() * Y.size(0)
        if args["clip"] > 0:
            clip_grad_norm_(model.parameters(), args["clip"])
        optimizer.step()
        total_logits.append(logits.detach())
        total_Y.append(Y)
    epoch_loss /= len(dataloader.dataset)
    print(f"train loss = {epoch_loss:.4f}")
    return eval_mosei_emo(torch.cat(total_logits), torch.cat(total_Y), args["threshold"])


def eval_one_epoch(phase="valid"):
    model.eval()
    total_logits, total_Y = [], []
    with torch.no_grad():
        for X, Y, META in dataloaders[phase]:
            X_text, X_audio, X_vision = X
            total_logits.append(model(X_text, X_audio, X_vision))
            total_Y.append(Y)
    return eval_mosei_emo(torch.cat(total_logits), torch.cat(total_Y), args["threshold"])


for epoch in range(1, args["epochs"] + 1):
    print(f"=== Epoch {epoch} ===")
    train_accs, train_f1s = train_one_epoch()
    valid_accs, valid_f1s = eval_one_epoch()
    print("valid acc: " + " ".join(f"{e} {a:.3f}" for e, a in zip(EMOTIONS, valid_accs)))
    print("valid f1:  " + " ".join(f"{e} {f:.3f}" for e, f in zip(EMOTIONS, valid_f1s))
          + f" | average {np.mean(valid_f1s):.3f}")
