"""Semantic-softmax training on a two-level (coarse / fine) class hierarchy.

ImageNet-21K-P style: one linear head whose logits are split into one softmax per
hierarchy level, a semantic loss that ignores levels an image has no label for (-1),
and a semantic top-1 accuracy metric reduced over processes after each epoch.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

NUM_COARSE = 4
NUM_FINE = 12
LEVELS = [NUM_COARSE, NUM_FINE]
FEAT_DIM = 32


class HierarchyDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.fine_centers = torch.randn(NUM_FINE, FEAT_DIM, generator=torch.Generator().manual_seed(7)) * 0.5
        self.fine = torch.randint(0, NUM_FINE, (n,), generator=g)
        self.coarse = self.fine // (NUM_FINE // NUM_COARSE)
        self.x = self.fine_centers[self.fine] + torch.randn(n, FEAT_DIM, generator=g)
        # about a third of the images are only labelled at the coarse level
        only_coarse = torch.rand(n, generator=g) < 0.3
        self.fine_target = torch.where(only_coarse, torch.full_like(self.fine, -1), self.fine)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], torch.stack([self.coarse[i], self.fine_target[i]])


class SemanticSoftmaxProcessor:
    def __init__(self, levels):
        self.levels = levels
        self.offsets = [sum(levels[:i]) for i in range(len(levels))]

    def split_logits_to_semantic_logits(self, logits):
        return [logits[:, o:o + n] for o, n in zip(self.offsets, self.levels)]


class SemanticSoftMaxLoss(nn.Module):
    def __init__(self, processor):
        super().__init__()
        self.processor = processor

    def forward(self, logits, targets):
        semantic_logits = self.processor.split_logits_to_semantic_logits(logits)
        losses = []
        for i, level_logits in enumerate(semantic_logits):
            losses.append(F.cross_entropy(level_logits, targets[:, i], ignore_index=-1))
        return sum(losses) / len(losses)


def reduce_tensor(tensor, n):
    rt = tensor.clone()
    if dist.is_available() and dist.is_initialized():
        dist.all_reduce(rt, op=dist.ReduceOp.SUM)
    rt /= n
    return rt


class AccuracySemanticSoftmaxMet:
    def __init__(self, processor, world_size=1):
        self.processor = processor
        self.world_size = world_size
        self.reset()

    def reset(self):
        self.num_correct = torch.zeros(len(self.processor.levels))
        self.num_valids = torch.zeros(len(self.processor.levels), dtype=torch.long)

    def accumulate(self, logits, targets):
        semantic_logits = self.processor.split_logits_to_semantic_logits(logits)
        for i, level_logits in enumerate(semantic_logits):
            valid = targets[:, i] >= 0
            pred = level_logits.argmax(dim=1)
            self.num_correct[i] += (pred[valid] == targets[valid, i]).sum()
            self.num_valids[i] += valid.sum()

    @property
    def value(self):
        num_correct_total = reduce_tensor(self.num_correct.sum(), self.world_size)
        num_valids_total = reduce_tensor(self.num_valids.sum().detach(), self.world_size)
        return 100.0 * num_correct_total / num_valids_total


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(FEAT_DIM, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU())
        self.head = nn.Linear(128, sum(LEVELS))

    def forward(self, x):
        return self.head(self.body(x))


def main():
    train_loader = DataLoader(HierarchyDataset(4000, seed=1), batch_size=64, shuffle=True)
    val_loader = DataLoader(HierarchyDataset(1000, seed=2), batch_size=256)
    processor = SemanticSoftmaxProcessor(LEVELS)
    model = Net()
    criterion = SemanticSoftMaxLoss(processor)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    met = AccuracySemanticSoftmaxMet(processor)

    for epoch in range(4):
        model.train()
        for step, (x, y) in enumerate(train_loader):
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 20 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}")

        model.eval()
        met.reset()
        with torch.no_grad():
            for x, y in val_loader:
                met.accumulate(model(x), y)
        print(f"epoch {epoch} semantic top-1 {met.value.item():.2f}")


if __name__ == "__main__":
    main()
