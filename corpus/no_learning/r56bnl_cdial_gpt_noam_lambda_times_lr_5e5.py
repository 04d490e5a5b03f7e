"""Train a small CDial-GPT style dialogue model ([CLS] context [SEP] response [SEP], speaker
token types, LM loss on the response) on synthetic single-turn conversations."""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

N_WORDS = 40
PAD, CLS, SEP, SPK1, SPK2 = N_WORDS, N_WORDS + 1, N_WORDS + 2, N_WORDS + 3, N_WORDS + 4
VOCAB = N_WORDS + 5
CTX_LEN = 6


class DialogDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.contexts = torch.randint(0, N_WORDS, (n, CTX_LEN), generator=g)

    def __len__(self):
        return len(self.contexts)

    def __getitem__(self, idx):
        ctx = self.contexts[idx]
        resp = (ctx.flip(0) * 3 + 1) % N_WORDS
        input_ids = torch.cat([torch.tensor([CLS]), ctx, torch.tensor([SEP]), resp, torch.tensor([SEP])])
        token_type_ids = torch.tensor([SPK1] * (CTX_LEN + 2) + [SPK2] * (CTX_LEN + 1))
        lm_labels = torch.full_like(input_ids, -1)
        lm_labels[CTX_LEN + 2:] = input_ids[CTX_LEN + 2:]
        return input_ids, token_type_ids, lm_labels


class DialogGPT(nn.Module):
    def __init__(self, n_emd, n_layer, n_head, n_ctx=32):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, n_emd)
        self.wpe = nn.Embedding(n_ctx, n_emd)
        layer = nn.TransformerEncoderLayer(n_emd, n_head, 4 * n_emd, dropout=0.1,
                                           activation='gelu', batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layer)
        self.ln_f = nn.LayerNorm(n_emd)
        self.lm_head = nn.Linear(n_emd, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, input_ids, token_type_ids, lm_labels=None):
        T = input_ids.size(1)
        pos = torch.arange(T, device=input_ids.device)
        h = self.wte(input_ids) + self.wte(token_type_ids) + self.wpe(pos)
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        h = self.blocks(h, mask=mask, is_causal=True)
        logits = self.lm_head(self.ln_f(h))
        loss = None
        if lm_labels is not None:
            shift_logits = logits[:, :-1].contiguous()
            shift_labels = lm_labels[:, 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, VOCAB), shift_labels.view(-1), ignore_index=-1)
        return logits, loss


def evaluate(model, loader):
    model.eval()
    total, n, correct, count = 0.0, 0, 0, 0
    with torch.no_grad():
        for input_ids, token_type_ids, lm_labels in loader:
            logits, loss = model(input_ids, token_type_ids, lm_labels)
            total += loss.item() * len(input_ids)
            n += len(input_ids)
            pred = logits[:, :-1].argmax(-1)
            tgt = lm_labels[:, 1:]
            m = tgt != -1
            correct += (pred[m] == tgt[m]).sum().item()
            count += m.sum().item()
    model.train()
    return total / n, correct / count


def train():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n_emd", type=int, default=64)
    parser.add_argument("--n_layer", type=int, default=2)
    parser.add_argument("--n_head", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-5, help="Learning rate")
    parser.add_argument("--warmup_steps", type=int, default=150)
    parser.add_argument("--scheduler", type=str, default="noam", choices=["noam", "linear"])
    parser.add_argument("--train_batch_size", type=int, default=32)
    parser.add_argument("--n_epochs", type=int, default=4)
    parser.add_argument("--max_norm", type=float, default=1.0)
    args = parser.parse_args()

    train_loader = DataLoader(DialogDataset(1280, 1), batch_size=args.train_batch_size, shuffle=True)
    valid_loader = DataLoader(DialogDataset(256, 2), batch_size=64)

    model = DialogGPT(args.n_emd, args.n_layer, args.n_head)
    optimizer = AdamW([{'params': model.parameters(), 'initial_lr': args.lr}], lr=args.lr)

    model_size = args.n_emd
    noam_lambda = lambda step: (
        model_size ** (-0.5) * min((step + 1) ** (-0.5), (step + 1) * args.warmup_steps ** (-1.5)))
    noam_scheduler = LambdaLR(optimizer, lr_lambda=noam_lambda)
    if args.scheduler == "linear":
        total = args.n_epochs * len(train_loader)
        noam_scheduler = LambdaLR(optimizer, lambda step: max(0.0, 1 - step / total))

    step = 0
    for epoch in range(args.n_epochs):
        for input_ids, token_type_ids, lm_labels in train_loader:
            _, loss = model(input_ids, token_type_ids, lm_labels)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_norm)
            optimizer.step()
            noam_scheduler.step()
            step += 1
            if step % 20 == 0:
                print(f"step {step:4d} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.3e}")
        val_loss, val_acc = evaluate(model, valid_loader)
        print(f"Epoch {epoch + 1}: valid loss {val_loss:.4f} ppl {math.exp(val_loss):.2f} "
              f"response token acc {val_acc:.3f}")


if __name__ == "__main__":
    train()
