"""Review sentiment from a topic-style bag-of-words inference network (TopicRNN-like feature extractor).

Reviews are generated here as word-count vectors over a 2000-word vocabulary; a handful of
positive and negative words decide the label.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

VOCAB = 2000
TOPIC_DIM = 64
CONFIG = {"hidden_dim": 256, "batch_size": 64, "num_epochs": 4, "lr": 0.3}


class ReviewBowDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        lex = np.random.default_rng(7).permutation(VOCAB)
        pos_words, neg_words = lex[:40], lex[40:80]
        self.y = rng.integers(0, 2, size=n)
        counts = rng.poisson(0.02, size=(n, VOCAB)).astype(np.float32)
        for i, label in enumerate(self.y):
            words = pos_words if label == 1 else neg_words
            counts[i, rng.choice(words, size=4)] += 1.0
        self.x = np.log1p(counts)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(self.x[i]), torch.tensor(self.y[i], dtype=torch.long)


class TopicClassifier(nn.Module):
    def __init__(self, vocab_size, hidden_dim, topic_dim, num_labels=2):
        super().__init__()
        self.inference_network = nn.Sequential(
            nn.Linear(vocab_size, hidden_dim),
            nn.ReLU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.ReLU(),
        )
        self.mu = nn.Linear(hidden_dim, topic_dim)
        self.classifier = nn.Linear(topic_dim, num_labels)

    def forward(self, bow):
        h = self.inference_network(bow)
        theta = torch.relu(self.mu(h))
        return self.classifier(theta)


def main():
    train_loader = DataLoader(ReviewBowDataset(3200, seed=0), batch_size=CONFIG["batch_size"], shuffle=True)
    valid_ds = ReviewBowDataset(800, seed=1)
    valid_x, valid_y = torch.from_numpy(valid_ds.x), torch.from_numpy(valid_ds.y).long()

    model = TopicClassifier(VOCAB, CONFIG["hidden_dim"], TOPIC_DIM)
    optimizer = torch.optim.Adam(model.parameters(), lr=CONFIG["lr"])
    criterion = nn.CrossEntropyLoss()

    for epoch in range(CONFIG["num_epochs"]):
        model.train()
        total, n = 0.0, 0
        for bow, label in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(bow), label)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
            total += loss.item()
            n += 1
        model.eval()
        with torch.no_grad():
            logits = model(valid_x)
            acc = (logits.argmax(1) == valid_y).float().mean().item()
            valid_loss = criterion(logits, valid_y).item()
        print(f"epoch {epoch + 1}: train loss {total / n:.4f}  valid loss {valid_loss:.4f}  valid acc {acc:.3f}")


if __name__ == "__main__":
    main()
