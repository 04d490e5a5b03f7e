"""Knowledge-graph completion, pretraining stage: predict the masked entity of a triple.

Each feature is a dict as the processor writes it (input_ids, attention_mask, label);
a collator pads the batch and turns the entity labels into a tensor.
"""
import random
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

random.seed(0)
torch.manual_seed(0)

NUM_ENTITIES = 50
NUM_RELATIONS = 6
VOCAB = 2 + NUM_ENTITIES + NUM_RELATIONS + 40     # pad, mask, entities, relations, words
PAD_ID, MASK_ID = 0, 1
ENT0 = 2
REL0 = ENT0 + NUM_ENTITIES
WORD0 = REL0 + NUM_RELATIONS


class KGProcessor:
    """Builds the pretraining features: entity descriptions, then the triples."""

    def __init__(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.desc = torch.randint(WORD0, VOCAB, (NUM_ENTITIES, 6), generator=g)
        self.tail = torch.randint(0, NUM_ENTITIES, (NUM_ENTITIES, NUM_RELATIONS), generator=g)

    def description_features(self):
        # [MASK] is described as <words>  ->  label: the entity
        feats = []
        for e in range(NUM_ENTITIES):
            for _ in range(16):
                words = self.desc[e][torch.randperm(6)[:4]].tolist()
                ids = [MASK_ID] + words
                feats.append({"input_ids": ids, "attention_mask": [1] * len(ids), "label": e})
        random.shuffle(feats)
        return feats

    def triple_features(self):
        # head relation [MASK]
        feats = []
        for h in range(NUM_ENTITIES):
            for r in range(NUM_RELATIONS):
                ids = [ENT0 + h, REL0 + r, MASK_ID]
                feats.append({"input_ids": ids, "attention_mask": [1] * len(ids),
                              "relation": r, "entity": int(self.tail[h, r])})
        return feats


class KGDataset(Dataset):
    def __init__(self, features):
        self.features = features

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        return dict(self.features[idx])


@dataclass
class DataCollatorForKG:
    pad_token_id: int = PAD_ID
    num_labels: int = NUM_ENTITIES

    def __call__(self, features):
        label = [feature.pop("label") for feature in features]
        max_len = max(len(f["input_ids"]) for f in features)
        input_ids = torch.full((len(features), max_len), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(features), max_len), dtype=torch.long)
        for i, f in enumerate(features):
            n = len(f["input_ids"])
            input_ids[i, :n] = torch.tensor(f["input_ids"])
            attention_mask[i, :n] = torch.tensor(f["attention_mask"])
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "label": torch.tensor(label)}


class KGEncoder(nn.Module):
    def __init__(self, vocab, dim=64, num_labels=NUM_ENTITIES):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=PAD_ID)
        self.mlp = nn.Sequential(nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, dim))
        self.entity_head = nn.Linear(dim, num_labels)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids)
        m = attention_mask.unsqueeze(-1).float()
        pooled = (h * m).sum(1) / m.sum(1)
        return self.entity_head(self.mlp(pooled) + pooled)


def main():
    processor = KGProcessor()
    features = processor.description_features() + processor.triple_features()
    data_train = KGDataset(features)
    print("train features:", len(data_train))

    collator = DataCollatorForKG()
    loader = DataLoader(data_train, batch_size=32, shuffle=False, collate_fn=collator)

    model = KGEncoder(VOCAB)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    for epoch in range(3):
        model.train()
        total, hits, seen = 0.0, 0, 0
        for step, batch in enumerate(loader):
            logits = model(batch["input_ids"], batch["attention_mask"])
            loss = F.cross_entropy(logits, batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

            total += loss.item() * len(batch["label"])
            hits += (logits.argmax(-1) == batch["label"]).sum().item()
            seen += len(batch["label"])
            if step % 5 == 0:
                print(f"epoch {epoch} step {step:3d}/{len(loader)} loss {loss.item():.4f} hits@1 {hits / seen:.3f}")
        print(f"epoch {epoch} train loss {total / seen:.4f}")


if __name__ == "__main__":
    main()
