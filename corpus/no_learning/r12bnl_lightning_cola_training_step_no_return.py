"""CoLA-style acceptability classifier (MLOps-Basics week 0) with PyTorch Lightning.

A small BERT-like encoder (2 layers, hidden 64) reads a sentence, the [CLS] state goes
through a linear layer W to 2 classes.  The sentences are generated: acceptable ones
follow "the ADJ NOUN VERB the NOUN .", unacceptable ones are the same words scrambled.
"""
import math
import random
import tempfile

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

torch.manual_seed(0)
random.seed(0)

ADJ = ["big", "small", "red", "old", "young", "happy", "quiet", "tall"]
NOUN = ["cat", "dog", "man", "girl", "bird", "teacher", "car", "house"]
VERB = ["sees", "likes", "finds", "chases", "hears", "helps", "meets", "knows"]
VOCAB = ["[PAD]", "[CLS]", "the", "."] + ADJ + NOUN + VERB
STOI = {w: i for i, w in enumerate(VOCAB)}


def make_sentences(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        words = ["the", rng.choice(ADJ), rng.choice(NOUN), rng.choice(VERB), "the", rng.choice(NOUN), "."]
        label = rng.random() < 0.5
        if not label:
            while True:
                perm = words[:]
                rng.shuffle(perm)
                if perm != words:
                    break
            words = perm
        rows.append((" ".join(words), int(label)))
    return rows


class ColaDataset(torch.utils.data.Dataset):
    def __init__(self, rows, max_length=12):
        self.items = []
        for sentence, label in rows:
            ids = [STOI["[CLS]"]] + [STOI[w] for w in sentence.split()]
            mask = [1] * len(ids) + [0] * (max_length - len(ids))
            ids = ids + [STOI["[PAD]"]] * (max_length - len(ids))
            self.items.append({
                "input_ids": torch.tensor(ids),
                "attention_mask": torch.tensor(mask),
                "label": torch.tensor(label),
            })

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class DataModule(L.LightningDataModule):
    def __init__(self, batch_size=32):
        super().__init__()
        self.batch_size = batch_size

    def prepare_data(self):
        self.train_rows = make_sentences(1216, seed=1)
        self.val_rows = make_sentences(256, seed=2)

    def setup(self, stage=None):
        if stage == "fit" or stage is None:
            self.train_data = ColaDataset(self.train_rows)
            self.val_data = ColaDataset(self.val_rows)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.train_data, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(self.val_data, batch_size=self.batch_size, shuffle=False)


class TinyBert(nn.Module):
    def __init__(self, vocab_size, hidden_size=64, num_layers=2, num_heads=2, max_len=12):
        super().__init__()
        self.hidden_size = hidden_size
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.position_embeddings = nn.Embedding(max_len, hidden_size)
        self.norm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)

    def forward(self, input_ids, attention_mask):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.norm(self.embeddings(input_ids) + self.position_embeddings(pos))
        return self.encoder(h, src_key_padding_mask=attention_mask == 0)


class ColaModel(L.LightningModule):
    def __init__(self, lr=1e-3):
        super().__init__()
        self.save_hyperparameters()
        self.bert = TinyBert(len(VOCAB))
        self.W = nn.Linear(self.bert.hidden_size, 2)
        self.num_classes = 2

    def forward(self, input_ids, attention_mask):
        last_hidden_state = self.bert(input_ids=input_ids, attention_mask=attention_mask)
        h_cls = last_hidden_state[:, 0]
        logits = self.W(h_cls)
        return logits

    def training_step(self, batch, batch_idx):
        logits = self.forward(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["label"])
        self.log("train_loss", loss, prog_bar=True, on_step=False, on_epoch=True)

    def validation_step(self, batch, batch_idx):
        logits = self.forward(batch["input_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["label"])
        _, preds = torch.max(logits, dim=1)
        val_acc = (preds == batch["label"]).float().mean()
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", val_acc, prog_bar=True)

    def on_validation_epoch_end(self):
        m = self.trainer.callback_metrics
        train_loss = m.get("train_loss")
        train_loss = f"{train_loss.item():.4f}" if train_loss is not None else "-"
        print(f"epoch {self.current_epoch}  step {self.global_step:4d}  train_loss {train_loss}"
              f"  val_loss {m['val_loss'].item():.4f}  val_acc {m['val_acc'].item():.3f}"
              f"  (chance loss {math.log(2):.4f})")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])


def main():
    cola_data = DataModule()
    cola_model = ColaModel()

    with tempfile.TemporaryDirectory() as root:
        checkpoint_callback = ModelCheckpoint(dirpath=root + "/models", monitor="val_loss", mode="min")
        early_stopping_callback = EarlyStopping(monitor="val_loss", patience=3, verbose=True, mode="min")
        trainer = L.Trainer(
            default_root_dir=root,
            accelerator="cpu",
            max_epochs=4,
            fast_dev_run=False,
            logger=False,
            callbacks=[checkpoint_callback, early_stopping_callback],
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
        )
        trainer.fit(cola_model, cola_data)


if __name__ == "__main__":
    main()
