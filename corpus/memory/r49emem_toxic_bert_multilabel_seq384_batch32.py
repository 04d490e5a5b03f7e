"""Multi-label toxic comment classifier: a small BERT-style transformer encoder over 512-token
comments, one logit per label (toxic, severe_toxic, obscene, threat, insult, identity_hate)."""
import math
import time
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(42)
np.random.seed(42)

args = {
    "max_seq_length": 384,
    "train_batch_size": 32,
    "eval_batch_size": 32,
    "learning_rate": 1e-3,
    "num_train_epochs": 2,
    "vocab_size": 2000,
    "hidden_size": 32,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "intermediate_size": 64,
}
label_cols = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]


class ToxicCommentsDataset(Dataset):
    def __init__(self, n, max_seq_length, seed):
        rng = np.random.RandomState(seed)
        self.input_ids = np.zeros((n, max_seq_length), dtype=np.int64)
        self.input_mask = np.zeros((n, max_seq_length), dtype=np.int64)
        self.labels = (rng.rand(n, len(label_cols)) < 0.3).astype(np.float32)
        for i in range(n):
            length = rng.randint(64, max_seq_length + 1)
            toks = rng.randint(100, args["vocab_size"], size=length)
            for j, on in enumerate(self.labels[i]):
                if on:
                    pos = rng.randint(1, length, size=6)
                    toks[pos] = 10 + j
            toks[0] = 1
            self.input_ids[i, :length] = toks
            self.input_mask[i, :length] = 1

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return (torch.from_numpy(self.input_ids[i]), torch.from_numpy(self.input_mask[i]),
                torch.from_numpy(self.labels[i]))


class BertForMultiLabelSequenceClassification(nn.Module):
    def __init__(self, num_labels=6):
        super().__init__()
        h = args["hidden_size"]
        self.word_embeddings = nn.Embedding(args["vocab_size"], h, padding_idx=0)
        self.position_embeddings = nn.Embedding(args["max_seq_length"], h)
        self.emb_norm = nn.LayerNorm(h)
        layer = nn.TransformerEncoderLayer(h, args["num_attention_heads"], args["intermediate_size"],
                                           dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, args["num_hidden_layers"], enable_nested_tensor=False)
        self.pooler = nn.Linear(h, h)
        self.dropout = nn.Dropout(0.1)
        self.classifier = nn.Linear(h, num_labels)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.emb_norm(self.word_embeddings(input_ids) + self.position_embeddings(pos))
        x = self.encoder(x, src_key_padding_mask=attention_mask == 0)
        mask = attention_mask.unsqueeze(-1).float()
        pooled = torch.tanh(self.pooler((x * mask).sum(1) / mask.sum(1)))
        return self.classifier(self.dropout(pooled))


train_data = ToxicCommentsDataset(64, args["max_seq_length"], seed=0)
eval_data = ToxicCommentsDataset(32, args["max_seq_length"], seed=1)
train_dataloader = DataLoader(train_data, batch_size=args["train_batch_size"], shuffle=True)
eval_dataloader = DataLoader(eval_data, batch_size=args["eval_batch_size"])

model = BertForMultiLabelSequenceClassification(num_labels=len(label_cols))
optimizer = torch.optim.AdamW(model.parameters(), lr=args["learning_rate"])
loss_fct = nn.BCEWithLogitsLoss()

print("***** Running training *****")
print("  Num examples = %d" % len(train_data))
print("  Batch size = %d" % args["train_batch_size"])
global_step = 0
t0 = time.time()
for epoch in range(args["num_train_epochs"]):
    model.train()
    tr_loss, nb_tr_steps = 0.0, 0
    for step, (input_ids, input_mask, label_ids) in enumerate(train_dataloader):
        logits = model(input_ids, input_mask)
        loss = loss_fct(logits, label_ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        tr_loss += loss.item()
        nb_tr_steps += 1
        global_step += 1
        print("epoch %d step %d loss %.4f" % (epoch, global_step, loss.item()))
    model.eval()
    correct, total = 0, 0
    with torch.no_grad():
        for input_ids, input_mask, label_ids in eval_dataloader:
            preds = (torch.sigmoid(model(input_ids, input_mask)) > 0.5).float()
            correct += (preds == label_ids).sum().item()
            total += label_ids.numel()
    print("epoch %d train loss %.4f eval label accuracy %.4f (%.1fs)" % (epoch, tr_loss / nb_tr_steps, correct / total, time.time() - t0))
