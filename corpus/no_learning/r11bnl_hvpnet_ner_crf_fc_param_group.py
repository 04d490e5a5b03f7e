"""Multimodal NER (text + image features) with a BERT-style encoder and a CRF head.

Follows the HVPNeT layout: a NERTrainer builds AdamW parameter groups by name
(bert / visual encoder + gates / crf + fc with a larger learning rate) and trains
with a linear warm-up.  Tokens, tags and image features are generated here.
"""
import argparse

import torch
import torch.nn as nn
from torch import optim
from torch.utils.data import DataLoader, Dataset

NUM_TAGS = 5      # O, B-PER, I-PER, B-LOC, I-LOC
VOCAB = 120
SEQ_LEN = 16


def make_split(n, seed):
    g = torch.Generator().manual_seed(seed)
    words = torch.randint(0, VOCAB, (n, SEQ_LEN), generator=g)
    # first 40 ids are person names, next 40 are locations; multi-token spans
    tags = torch.zeros(n, SEQ_LEN, dtype=torch.long)
    is_per = words < 40
    is_loc = (words >= 40) & (words < 80)
    prev_per = torch.zeros_like(is_per)
    prev_per[:, 1:] = is_per[:, :-1]
    prev_loc = torch.zeros_like(is_loc)
    prev_loc[:, 1:] = is_loc[:, :-1]
    tags[is_per & ~prev_per] = 1
    tags[is_per & prev_per] = 2
    tags[is_loc & ~prev_loc] = 3
    tags[is_loc & prev_loc] = 4
    imgs = torch.randn(n, 4, 32, generator=g)
    return words, tags, imgs


class MMPNERDataset(Dataset):
    def __init__(self, n, seed):
        self.words, self.tags, self.imgs = make_split(n, seed)

    def __len__(self):
        return len(self.words)

    def __getitem__(self, i):
        return self.words[i], torch.ones(SEQ_LEN, dtype=torch.long), self.tags[i], self.imgs[i]


class CRF(nn.Module):
    def __init__(self, num_tags):
        super().__init__()
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))

    def forward(self, emissions, tags, mask):
        # negative mean log-likelihood
        B, T, _ = emissions.shape
        mask = mask.bool()
        score = self.start_transitions[tags[:, 0]] + emissions[:, 0].gather(1, tags[:, :1]).squeeze(1)
        for t in range(1, T):
            step = self.transitions[tags[:, t - 1], tags[:, t]] + emissions[:, t].gather(1, tags[:, t:t + 1]).squeeze(1)
            score = score + step * mask[:, t]
        score = score + self.end_transitions[tags[:, -1]]
        alpha = self.start_transitions + emissions[:, 0]
        for t in range(1, T):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transitions + emissions[:, t].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, t:t + 1], nxt, alpha)
        log_z = torch.logsumexp(alpha + self.end_transitions, dim=1)
        return (log_z - score).mean()


class HMNeTNERModel(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.bert = nn.ModuleDict({
            "embeddings": nn.Embedding(VOCAB, hidden),
            "position": nn.Embedding(SEQ_LEN, hidden),
            "encoder": nn.TransformerEncoder(
                nn.TransformerEncoderLayer(hidden, 4, 4 * hidden, dropout=0.1, batch_first=True), 2),
        })
        self.encoder_conv = nn.Sequential(nn.Linear(32, hidden), nn.Tanh())
        self.gates = nn.Linear(2 * hidden, 1)
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(hidden, NUM_TAGS)
        self.crf = CRF(NUM_TAGS)

    def forward(self, input_ids, attention_mask, labels, images):
        pos = torch.arange(input_ids.size(1))
        h = self.bert["embeddings"](input_ids) + self.bert["position"](pos)
        h = self.bert["encoder"](h, src_key_padding_mask=attention_mask == 0)
        vis = self.encoder_conv(images).mean(1, keepdim=True).expand_as(h)
        gate = torch.sigmoid(self.gates(torch.cat([h, vis], -1)))
        h = h + gate * vis
        emissions = self.fc(self.dropout(h))
        loss = self.crf(emissions, labels, attention_mask)
        return emissions, loss


class NERTrainer:
    def __init__(self, train_data, dev_data, model, args):
        self.train_data = train_data
        self.dev_data = dev_data
        self.model = model
        self.args = args
        self.step = 0
        self.before_multimodal_train()

    def before_multimodal_train(self):
        optimizer_grouped_parameters = []
        params = {"lr": self.args.lr, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "bert" in name:
                params["params"].append(param)
        optimizer_grouped_parameters.append(params)

        params = {"lr": self.args.lr, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "encoder_conv" in name or "gates" in name:
                params["params"].append(param)
        optimizer_grouped_parameters.append(params)

        # crf lr
        params = {"lr": 5e-2, "weight_decay": 1e-2}
        params["params"] = []
        for name, param in self.model.named_parameters():
            if "crf" in name or name.startswith("fc"):
                params["params"].append(param)

        self.optimizer = optim.AdamW(optimizer_grouped_parameters, lr=self.args.lr)
        total = self.args.num_epochs * len(self.train_data)
        warmup = int(self.args.warmup_ratio * total)
        self.scheduler = optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min((s + 1) / max(1, warmup), max(0.0, (total - s) / max(1, total - warmup))))

    def train(self):
        self.model.train()
        for epoch in range(1, self.args.num_epochs + 1):
            avg_loss, n_logged = 0.0, 0
            for batch in self.train_data:
                self.step += 1
                input_ids, attention_mask, labels, images = batch
                _, loss = self.model(input_ids, attention_mask, labels, images)
                avg_loss += loss.item()
                n_logged += 1
                loss.backward()
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
                if self.step % self.args.log_steps == 0:
                    print(f"epoch {epoch} step {self.step:4d} avg loss {avg_loss / n_logged:.4f}")
                    avg_loss, n_logged = 0.0, 0
            self.evaluate(epoch)

    def evaluate(self, epoch):
        self.model.eval()
        correct = total = ent_correct = ent_total = 0
        with torch.no_grad():
            for input_ids, attention_mask, labels, images in self.dev_data:
                emissions, _ = self.model(input_ids, attention_mask, labels, images)
                pred = emissions.argmax(-1)
                correct += (pred == labels).sum().item()
                total += labels.numel()
                ent = labels > 0
                ent_correct += (pred[ent] == labels[ent]).sum().item()
                ent_total += ent.sum().item()
        print(f"epoch {epoch} dev token acc {correct / total:.3f}  entity-token acc {ent_correct / ent_total:.3f}")
        self.model.train()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num_epochs", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--warmup_ratio", type=float, default=0.01)
    parser.add_argument("--log_steps", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1234)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_loader = DataLoader(MMPNERDataset(800, seed=0), batch_size=args.batch_size, shuffle=True)
    dev_loader = DataLoader(MMPNERDataset(160, seed=1), batch_size=64)
    model = HMNeTNERModel()
    trainer = NERTrainer(train_loader, dev_loader, model, args)
    trainer.train()


if __name__ == "__main__":
    main()
