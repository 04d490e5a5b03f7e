"""Tiny wav2vec 2.0 style pre-training on synthetic "speech": a conv feature encoder, a Gumbel
vector quantizer for the targets, span masking, a small Transformer context network and the
contrastive + diversity loss of Wav2Vec2ForPreTraining."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class SyntheticSpeech(Dataset):
    def __init__(self, n=256, n_units=8, unit_len=40, units_per_utt=8):
        g = torch.Generator().manual_seed(1)
        t = torch.arange(unit_len).float()
        freqs = torch.linspace(0.05, 0.45, n_units)
        self.protos = torch.stack([torch.sin(2 * math.pi * f * t) * torch.hann_window(unit_len) for f in freqs])
        ids = torch.randint(0, n_units, (n, units_per_utt), generator=g)
        wav = self.protos[ids].reshape(n, -1)
        self.wav = wav + 0.1 * torch.randn(wav.shape, generator=g)

    def __len__(self):
        return len(self.wav)

    def __getitem__(self, i):
        return self.wav[i]


class FeatureEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, dim, 10, stride=5), nn.GELU(),
            nn.Conv1d(dim, dim, 4, stride=2), nn.GELU(),
            nn.Conv1d(dim, dim, 2, stride=2), nn.GELU(),
        )

    def forward(self, wav):
        return self.conv(wav.unsqueeze(1)).transpose(1, 2)


class GumbelVectorQuantizer(nn.Module):
    def __init__(self, in_dim, num_groups=2, num_vars=16, codevector_dim=32):
        super().__init__()
        self.num_groups = num_groups
        self.num_vars = num_vars
        self.codevectors = nn.Parameter(torch.rand(1, num_groups * num_vars, codevector_dim // num_groups))
        self.weight_proj = nn.Linear(in_dim, num_groups * num_vars)
        nn.init.normal_(self.weight_proj.weight, std=1.0)
        nn.init.zeros_(self.weight_proj.bias)
        self.temperature = 2.0

    @staticmethod
    def _compute_perplexity(probs, mask):
        mask_ext = mask.flatten()[:, None, None].expand(probs.shape)
        probs = torch.where(mask_ext, probs, torch.zeros_like(probs))
        marginal = probs.sum(dim=0) / mask.sum()
        return torch.exp(-torch.sum(marginal * torch.log(marginal + 1e-7), dim=-1)).sum()

    def forward(self, hidden, mask):
        b, t, _ = hidden.shape
        hidden = self.weight_proj(hidden).view(b * t * self.num_groups, -1)
        if self.training:
            cv_probs = F.gumbel_softmax(hidden.float(), tau=self.temperature, hard=True).type_as(hidden)
            soft = torch.softmax(hidden.view(b * t, self.num_groups, -1).float(), dim=-1)
            perplexity = self._compute_perplexity(soft, mask)
        else:
            idx = hidden.argmax(dim=-1)
            cv_probs = hidden.new_zeros(hidden.shape).scatter_(-1, idx.view(-1, 1), 1.0)
            perplexity = self._compute_perplexity(cv_probs.view(b * t, self.num_groups, -1), mask)
        cv_probs = cv_probs.view(b * t, -1)
        codevectors = cv_probs.unsqueeze(-1) * self.codevectors
        codevectors = codevectors.view(b * t, self.num_groups, self.num_vars, -1).sum(-2).view(b, t, -1)
        return codevectors, perplexity


def compute_mask(b, t, mask_prob=0.5, span=3):
    mask = torch.zeros(b, t, dtype=torch.bool)
    n_spans = max(1, int(mask_prob * t / span))
    for i in range(b):
        starts = torch.randperm(t - span)[:n_spans]
        for s in starts:
            mask[i, s:s + span] = True
    return mask


def sample_negatives(b, t, k):
    idx = torch.randint(0, t - 1, (b, t, k))
    own = torch.arange(t).view(1, t, 1)
    idx = idx + (idx >= own).long()
    return idx + (torch.arange(b) * t).view(b, 1, 1)


class Wav2Vec2Tiny(nn.Module):
    def __init__(self, dim=64, proj_dim=32):
        super().__init__()
        self.feature_extractor = FeatureEncoder(dim)
        self.layer_norm = nn.LayerNorm(dim)
        self.feature_projection = nn.Linear(dim, dim)
        self.masked_spec_embed = nn.Parameter(torch.rand(dim))
        self.pos_conv = nn.Conv1d(dim, dim, 9, padding=4, groups=4)
        layer = nn.TransformerEncoderLayer(dim, 4, 128, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.quantizer = GumbelVectorQuantizer(dim, codevector_dim=proj_dim)
        self.project_q = nn.Linear(proj_dim, proj_dim)
        self.project_hid = nn.Linear(dim, proj_dim)

    def forward(self, wav, mask):
        feats = self.layer_norm(self.feature_extractor(wav))
        hidden = self.feature_projection(feats)
        hidden = torch.where(mask.unsqueeze(-1), self.masked_spec_embed.to(hidden.dtype), hidden)
        hidden = hidden + F.gelu(self.pos_conv(hidden.transpose(1, 2))).transpose(1, 2)
        hidden = self.encoder(hidden)
        quantized, perplexity = self.quantizer(feats, mask)
        return self.project_hid(hidden), self.project_q(quantized), perplexity


def pretraining_loss(model, wav, num_negatives=10, temp=0.1, diversity_weight=0.1):
    b = wav.shape[0]
    t = model.feature_extractor(wav[:1]).shape[1]
    mask = compute_mask(b, t)
    pred, quant, perplexity = model(wav, mask)
    neg_idx = sample_negatives(b, t, num_negatives)
    negatives = quant.reshape(b * t, -1)[neg_idx.view(-1)].view(b, t, num_negatives, -1)
    targets = torch.cat([quant.unsqueeze(2), negatives], dim=2)
    logits = F.cosine_similarity(pred.unsqueeze(2).float(), targets.float(), dim=-1) / temp
    neg_is_pos = (quant.unsqueeze(2) == negatives).all(-1)
    logits[:, :, 1:][neg_is_pos] = float("-inf")
    logits = logits[mask]
    labels = torch.zeros(logits.shape[0], dtype=torch.long)
    contrastive = F.cross_entropy(logits, labels, reduction="sum")
    gv = model.quantizer.num_groups * model.quantizer.num_vars
    diversity = (gv - perplexity) / gv * mask.sum()
    loss = (contrastive + diversity_weight * diversity) / mask.sum()
    acc = (logits.argmax(-1) == 0).float().mean().item()
    return loss, contrastive.item() / mask.sum().item(), acc, perplexity.item()


def main():
    data = SyntheticSpeech()
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = Wav2Vec2Tiny()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    epochs = 8
    total_steps = epochs * len(loader)
    warmup = 20
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total_steps - s) / (total_steps - warmup))))
    step = 0
    for epoch in range(epochs):
        model.train()
        tot, tot_c, tot_acc, n = 0.0, 0.0, 0.0, 0
        for wav in loader:
            loss, c_loss, acc, ppl = pretraining_loss(model, wav)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
            optimizer.step()
            scheduler.step()
            step += 1
            model.quantizer.temperature = max(2.0 * 0.99 ** step, 0.5)
            tot += loss.item(); tot_c += c_loss; tot_acc += acc; n += 1
        print(f"epoch {epoch + 1} step {step} loss {tot / n:.4f} contrastive {tot_c / n:.4f} "
              f"acc {tot_acc / n:.3f} perplexity {ppl:.2f} temp {model.quantizer.temperature:.3f}")


if __name__ == "__main__":
    main()
