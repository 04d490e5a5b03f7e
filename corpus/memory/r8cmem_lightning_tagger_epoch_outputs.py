"""Multi-label tag prediction for short technical questions with PyTorch Lightning.

Every question (a bag of token ids) carries a handful of tags out of a large tag vocabulary.
A bag-of-embeddings encoder scores all tags at once and is trained with BCE-with-logits; at the
end of every training epoch the module reports the epoch's micro-F1 computed from the
predictions and targets of all training steps.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, Dataset

L.seed_everything(0, verbose=False)

VOCAB_SIZE = 6000
NUM_TAGS = 2000
SEQ_LEN = 48


class TaggedQuestions(Dataset):
    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        # every tag owns a few characteristic tokens
        self.tag_tokens = rng.randint(1, VOCAB_SIZE, size=(NUM_TAGS, 6))
        popularity = 1.0 / np.arange(1, NUM_TAGS + 1) ** 0.6
        cdf = np.cumsum(popularity) / popularity.sum()
        n_tags = rng.randint(2, 6, size=n)
        drawn = np.searchsorted(cdf, rng.rand(n, 5))
        self.tags, self.tokens = [], []
        for i in range(n):
            tags = np.unique(drawn[i, :n_tags[i]])
            words = self.tag_tokens[tags][:, rng.randint(0, 6, size=4)].ravel()
            seq = np.concatenate([words, rng.randint(1, VOCAB_SIZE, size=SEQ_LEN - len(words))])
            self.tags.append(tags)
            self.tokens.append(rng.permutation(seq))

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, idx):
        target = torch.zeros(NUM_TAGS)
        target[torch.from_numpy(self.tags[idx])] = 1.0
        return torch.from_numpy(self.tokens[idx]).long(), target


class TagPredictor(L.LightningModule):
    def __init__(self, embed_dim=128, lr=1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.embedding = nn.EmbeddingBag(VOCAB_SIZE, embed_dim, mode="sum")
        self.hidden = nn.Linear(embed_dim, embed_dim)
        self.classifier = nn.Linear(embed_dim, NUM_TAGS)
        self.training_step_outputs = []

    def forward(self, tokens):
        h = F.relu(self.hidden(self.embedding(tokens)))
        return self.classifier(h)

    def training_step(self, batch, batch_idx):
        tokens, target = batch
        logits = self(tokens)
        loss = F.binary_cross_entropy_with_logits(logits, target)
        self.training_step_outputs.append({"loss": loss.detach(),
                                           "probs": torch.sigmoid(logits).detach(),
                                           "target": target})
        if batch_idx % 10 == 0:
            print(f"epoch {self.current_epoch} step {batch_idx:3d} loss {loss.item():.5f}")
        return loss

    def on_train_epoch_end(self):
        outputs = self.training_step_outputs
        probs = torch.cat([o["probs"] for o in outputs])
        target = torch.cat([o["target"] for o in outputs])
        pred = (probs > 0.5).float()
        tp = (pred * target).sum()
        precision = tp / pred.sum().clamp(min=1)
        recall = tp / target.sum()
        f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-8)
        avg_loss = torch.stack([o["loss"] for o in outputs]).mean()
        print(f"epoch {self.current_epoch}: train loss {avg_loss:.5f} micro-F1 {f1:.3f} "
              f"(P {precision:.3f} R {recall:.3f})")
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    train_set = TaggedQuestions(12800, seed=1)
    train_loader = DataLoader(train_set, batch_size=256, shuffle=True)
    model = TagPredictor()
    trainer = L.Trainer(accelerator="cpu", max_epochs=3, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, train_loader)
