"""Relation-typed link classifier: every relation type has its own projection
of the head/tail entity features and its own pair of mixing weights; the
scores of the four interaction classes are trained with cross-entropy."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

NUM_RELATIONS = 10
NUM_FEATURES = 16
NUM_CLASSES = 4


class RelationTriples(Dataset):
    def __init__(self, n, teachers, seed):
        g = torch.Generator().manual_seed(seed)
        self.head = torch.randn(n, NUM_FEATURES, generator=g)
        self.tail = torch.randn(n, NUM_FEATURES, generator=g)
        self.rel = torch.randint(0, NUM_RELATIONS, (n,), generator=g)
        pair = self.head + 0.5 * self.tail
        scores = torch.einsum("ncf,nf->nc", teachers[self.rel], pair)
        self.label = scores.argmax(dim=1)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return self.head[i], self.tail[i], self.rel[i], self.label[i]


class RelationalScorer(nn.Module):
    def __init__(self, numfeatures, numrel, num_relations):
        super().__init__()
        self.num_relations = num_relations
        self.waggrs = {rel: {'w': nn.Parameter(1. + 0.1 * torch.randn(1, 2)), 'b': nn.Parameter(torch.zeros(1, numrel))} for rel in range(num_relations)}
        self.list_relations = {rel: nn.Linear(numfeatures, numrel) for rel in range(num_relations)}
        self.logit_scale = nn.Parameter(torch.ones(1))

    def forward(self, head, tail, rel):
        out = head.new_zeros(head.size(0), NUM_CLASSES)
        for r in range(self.num_relations):
            idx = (rel == r).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            lin = self.list_relations[r]
            w = self.waggrs[r]['w']
            b = self.waggrs[r]['b']
            out = out.index_copy(0, idx, w[0, 0] * lin(head[idx]) + w[0, 1] * lin(tail[idx]) + b)
        return self.logit_scale * out


def evaluate(model, loader):
    correct, total, loss_sum = 0, 0, 0.0
    with torch.no_grad():
        for head, tail, rel, label in loader:
            logits = model(head, tail, rel)
            loss_sum += F.cross_entropy(logits, label, reduction="sum").item()
            correct += (logits.argmax(1) == label).sum().item()
            total += label.numel()
    return loss_sum / total, correct / total


def main():
    teachers = torch.randn(NUM_RELATIONS, NUM_CLASSES, NUM_FEATURES)
    train_set = RelationTriples(2048, teachers, seed=1)
    val_set = RelationTriples(512, teachers, seed=2)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)

    model = RelationalScorer(NUM_FEATURES, NUM_CLASSES, NUM_RELATIONS)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    print("model parameters:", sum(p.numel() for p in model.parameters()))

    for epoch in range(6):
        model.train()
        running, seen = 0.0, 0
        for step, (head, tail, rel, label) in enumerate(train_loader):
            optimizer.zero_grad()
            logits = model(head, tail, rel)
            loss = F.cross_entropy(logits, label)
            loss.backward()
            optimizer.step()
            running += loss.item() * label.numel()
            seen += label.numel()
        val_loss, val_acc = evaluate(model, val_loader)
        print(f"epoch {epoch + 1}: train_loss {running / seen:.4f}  val_loss {val_loss:.4f}  val_acc {val_acc:.3f}")


if __name__ == "__main__":
    main()
