"""LSTM language model with an adaptive softmax output layer, after facebookresearch/pytext
(models/language_models/lmlstm.py + models/output_layers/lm_adaptive_softmax_output_layer.py).

The LSTM returns hidden features, not vocabulary logits; nn.AdaptiveLogSoftmaxWithLoss (cutoffs
[40, 300], div_value 4, no head bias) is applied one time step at a time, the returned target
log-probabilities are masked where the target is PAD and the loss is -sum / number of real tokens.
Predictions use ada_logsoftmax.log_prob(...).argmax. The synthetic corpus is Zipf-distributed
over 1500 word ids sorted by frequency (the adaptive softmax assumption): each sentence is a run
of (word, partner(word)) pairs, so every second token is predictable from the one before it.
"""
import math

import torch
import torch.nn as nn
from torch.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

PAD, EOS, VOCAB = 0, 1, 1500


def partner(t):
    return ((t - 2) ^ 1) + 2


class ZipfSentences(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        ranks = torch.arange(1, VOCAB - 1, dtype=torch.float)
        probs = 1.0 / ranks ** 1.1
        self.sentences = []
        for _ in range(n):
            n_pairs = int(torch.randint(3, 9, (1,), generator=g))
            words = (torch.multinomial(probs, n_pairs, replacement=True, generator=g) + 2).tolist()
            sent = []
            for w in words:
                sent += [w, partner(w)]
            self.sentences.append(sent + [EOS])

    def __len__(self):
        return len(self.sentences)

    def __getitem__(self, idx):
        return self.sentences[idx]


def collate(batch):
    longest = max(len(s) for s in batch)
    tokens = torch.full((len(batch), longest), PAD, dtype=torch.long)
    for i, s in enumerate(batch):
        tokens[i, : len(s)] = torch.tensor(s)
    bos = torch.full((len(batch), 1), EOS, dtype=torch.long)
    inputs = torch.cat([bos, tokens[:, :-1]], dim=1)
    return inputs, tokens


class LMLSTM(nn.Module):
    def __init__(self, vocab=VOCAB, embed_dim=64, hidden=128):
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(0.1)

    def forward(self, tokens):
        out, _ = self.lstm(self.embedding(tokens))
        return self.dropout(out)


class LMASOutputLayer(nn.Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, pad_token_idx=PAD):
        super().__init__()
        self.pad_token_idx = pad_token_idx
        self.ada_logsoftmax = AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value, head_bias)

    def get_loss(self, logit, target):
        output = logit.new_zeros(logit.size(0), logit.size(1))
        tokens_num = logit.new_zeros(logit.size(0), logit.size(1))
        for j in range(logit.size(1)):
            target_mask_pad = (target[:, j] != self.pad_token_idx).float()
            output[:, j] = self.ada_logsoftmax(logit[:, j, :], target[:, j])[0] * target_mask_pad
            tokens_num[:, j] = target_mask_pad
        return (-torch.sum(output)) / torch.sum(tokens_num)

    def get_pred(self, logit):
        preds = logit.new_zeros(logit.size(0), logit.size(1), dtype=torch.long)
        for i in range(logit.size(1)):
            preds[:, i] = torch.argmax(self.ada_logsoftmax.log_prob(logit[:, i, :]), dim=1)
        return preds


def evaluate(model, output_layer, loader):
    model.eval()
    total_loss, total_tokens, correct_partner, n_partner = 0.0, 0, 0, 0
    with torch.no_grad():
        for inputs, targets in loader:
            feats = model(inputs)
            n_tok = (targets != PAD).sum().item()
            total_loss += output_layer.get_loss(feats, targets).item() * n_tok
            total_tokens += n_tok
            preds = output_layer.get_pred(feats)
            odd = torch.zeros_like(targets, dtype=torch.bool)
            odd[:, 1::2] = True
            odd &= (targets != PAD) & (targets != EOS)
            correct_partner += (preds[odd] == targets[odd]).sum().item()
            n_partner += odd.sum().item()
    model.train()
    return total_loss / total_tokens, correct_partner / n_partner


def main():
    train_loader = DataLoader(ZipfSentences(3000, seed=1), batch_size=32, shuffle=True, collate_fn=collate)
    valid_loader = DataLoader(ZipfSentences(400, seed=2), batch_size=100, collate_fn=collate)

    model = LMLSTM()
    output_layer = LMASOutputLayer(128, VOCAB, cutoffs=[40, 300], div_value=4.0, head_bias=False)
    params = list(model.parameters()) + list(output_layer.parameters())
    optimizer = torch.optim.Adam(params, lr=3e-3)

    val_loss, acc = evaluate(model, output_layer, valid_loader)
    print(f"| start | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f} | partner acc {acc:.3f}")
    step = 0
    for epoch in range(1, 3):
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            feats = model(inputs)
            loss = output_layer.get_loss(feats, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            step += 1
            if step % 25 == 0:
                print(f"| epoch {epoch:3d} | step {step:4d} | loss {loss.item():5.2f} | ppl {math.exp(loss.item()):8.2f}")
        val_loss, acc = evaluate(model, output_layer, valid_loader)
        print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f} | partner acc {acc:.3f}")


if __name__ == "__main__":
    main()
