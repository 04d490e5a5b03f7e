"""Text classifier trained with R-Drop as in dropreg/R-Drop (huggingface_transformer_src, the
BertForSequenceClassification change): the batch is concatenated with itself, one forward pass with
dropout gives two different sets of logits per example, and the loss adds the symmetric KL between
them (compute_kl_loss) to the cross-entropy. GLUE is replaced by synthetic token sequences."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)

VOCAB, SEQ, N_CLASSES = 500, 24, 3


class KeywordDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.tokens = torch.randint(30, VOCAB, (n, SEQ), generator=g)
        for i in range(n):
            k = int(torch.randint(2, 5, (1,), generator=g))
            pos = torch.randperm(SEQ, generator=g)[:k]
            words = self.labels[i] * 10 + torch.randint(0, 10, (k,), generator=g)
            self.tokens[i, pos] = words
            flip = torch.rand(1, generator=g) < 0.1
            if flip:
                self.labels[i] = int(torch.randint(0, N_CLASSES, (1,), generator=g))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


class Classifier(nn.Module):
    def __init__(self, d=64, p=0.3):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, d))
        layer = nn.TransformerEncoderLayer(d, 4, 128, dropout=p, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1)
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(d, N_CLASSES)

    def forward(self, input_ids):
        h = self.encoder(self.dropout(self.embed(input_ids) + self.pos))
        return self.classifier(self.dropout(h.mean(dim=1)))


def compute_kl_loss(p, q, pad_mask=None):
    p_loss = F.kl_div(F.log_softmax(p, dim=-1), F.softmax(q, dim=-1), reduction='none')
    q_loss = F.kl_div(F.log_softmax(q, dim=-1), F.softmax(p, dim=-1), reduction='none')

    # pad_mask is for seq-level tasks
    if pad_mask is not None:
        p_loss.masked_fill_(pad_mask, 0.)
        q_loss.masked_fill_(pad_mask, 0.)

    # You can choose whether to use function "sum" and "mean" depending on your task
    p_loss = p_loss.sum()
    q_loss = q_loss.sum()

    loss = (p_loss + q_loss) / 2
    return loss


train_loader = DataLoader(KeywordDataset(1536, 0), batch_size=32, shuffle=True)
eval_loader = DataLoader(KeywordDataset(512, 1), batch_size=256)
model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
alpha = 1.0


def evaluate():
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in eval_loader:
            correct += (model(x).argmax(-1) == y).sum().item()
    model.train()
    return correct / len(eval_loader.dataset)


print('epoch 0  eval acc %.3f' % evaluate())
for epoch in range(1, 6):
    ce_sum, kl_sum, n = 0.0, 0.0, 0
    for input_ids, labels in train_loader:
        input_ids = torch.cat([input_ids, input_ids.clone()], dim=0)
        labels = torch.cat([labels, labels.clone()], dim=0)
        logits = model(input_ids)
        ce_loss = F.cross_entropy(logits, labels)
        bsz = logits.size(0) // 2
        kl_loss = compute_kl_loss(logits[:bsz], logits[bsz:]) / bsz
        loss = ce_loss + alpha * kl_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ce_sum += ce_loss.item()
        kl_sum += kl_loss.item()
        n += 1
    print('epoch %d  ce %.4f  kl %.4f  eval acc %.3f' % (epoch, ce_sum / n, kl_sum / n, evaluate()))
