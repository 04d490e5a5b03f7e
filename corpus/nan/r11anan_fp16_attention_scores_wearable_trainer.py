"""Activity recognition from wrist-worn sensor windows (accelerometer counts and heart
rate) with a small transformer encoder. Training goes through a small Trainer /
TrainingArguments pair modelled on the transformers Trainer, with fp16 turned on to
halve memory for long windows.
"""
import copy
import math
import time
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

ACTIVITIES = ["sitting", "walking", "running", "cycling", "stairs"]


class WearableWindows(Dataset):
    def __init__(self, n_windows, window=32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n_windows):
            label = int(torch.randint(len(ACTIVITIES), (1,), generator=g))
            t = torch.arange(window, dtype=torch.float32)
            cadence = [0.0, 0.9, 1.6, 1.1, 0.7][label]
            amp = [20.0, 350.0, 900.0, 250.0, 420.0][label]
            phase = 6.28 * torch.rand(3, generator=g)
            axes = [amp * (1 + torch.sin(cadence * t + phase[i])) + 40 * torch.rand(window, generator=g)
                    for i in range(3)]
            hr = [70.0, 105.0, 155.0, 125.0, 118.0][label] + 5 * torch.randn(window, generator=g)
            feats = torch.stack(axes + [hr], dim=-1)
            self.items.append({"input_values": feats, "labels": torch.tensor(label)})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def attention(query, key, value, mask=None, dropout=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e4)
    p_attn = scores.softmax(dim=-1)
    if dropout is not None:
        p_attn = dropout(p_attn)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model, dropout=0.1):
        super().__init__()
        self.d_k = d_model // h
        self.h = h
        self.linears = nn.ModuleList([copy.deepcopy(nn.Linear(d_model, d_model)) for _ in range(4)])
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        nbatches = query.size(0)
        query, key, value = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                             for lin, x in zip(self.linears, (query, key, value))]
        x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.linears[-1](x)


class EncoderLayer(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout=0.1):
        super().__init__()
        self.self_attn = MultiHeadedAttention(h, d_model, dropout)
        self.feed_forward = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class SensorTransformerForClassification(nn.Module):
    def __init__(self, n_features=4, d_model=64, h=4, d_ff=128, n_layers=2, num_labels=5):
        super().__init__()
        self.input_proj = nn.Linear(n_features, d_model)
        self.pos = nn.Parameter(torch.zeros(1, 32, d_model))
        self.layers = nn.ModuleList([EncoderLayer(d_model, h, d_ff) for _ in range(n_layers)])
        self.classifier = nn.Linear(d_model, num_labels)

    def forward(self, input_values, labels=None):
        x = self.input_proj(input_values) + self.pos[:, : input_values.size(1)]
        for layer in self.layers:
            x = layer(x)
        logits = self.classifier(x.mean(dim=1))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.float(), labels)
        return {"loss": loss, "logits": logits}


@dataclass
class TrainingArguments:
    output_dir: str = "tmp_trainer"
    learning_rate: float = 0.05
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 128
    num_train_epochs: int = 2
    logging_steps: int = 10
    fp16: bool = True
    seed: int = 42


class Trainer:
    def __init__(self, model, args, train_dataset, eval_dataset=None):
        self.model = model
        self.args = args
        self.train_dataset = train_dataset
        self.eval_dataset = eval_dataset
        self.dtype = torch.float16 if args.fp16 else torch.float32
        if args.fp16:
            self.model = self.model.half()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.learning_rate, momentum=0.9)
        self.global_step = 0

    def get_train_dataloader(self):
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size,
                          shuffle=True, drop_last=True)

    def _prepare_inputs(self, inputs):
        return {k: (v.to(self.dtype) if v.is_floating_point() else v) for k, v in inputs.items()}

    def compute_loss(self, model, inputs):
        outputs = model(**inputs)
        return outputs["loss"]

    def training_step(self, model, inputs):
        model.train()
        inputs = self._prepare_inputs(inputs)
        loss = self.compute_loss(model, inputs)
        loss.backward()
        return loss.detach()

    def evaluate(self):
        self.model.eval()
        loader = DataLoader(self.eval_dataset, batch_size=self.args.per_device_eval_batch_size)
        correct, total, losses = 0, 0, []
        with torch.no_grad():
            for inputs in loader:
                out = self.model(**self._prepare_inputs(inputs))
                losses.append(out["loss"].item())
                correct += (out["logits"].argmax(-1) == inputs["labels"]).sum().item()
                total += len(inputs["labels"])
        return {"eval_loss": sum(losses) / len(losses), "eval_accuracy": correct / total}

    def train(self):
        torch.manual_seed(self.args.seed)
        loader = self.get_train_dataloader()
        start = time.time()
        for epoch in range(self.args.num_train_epochs):
            for inputs in loader:
                tr_loss = self.training_step(self.model, inputs)
                self.optimizer.step()
                self.optimizer.zero_grad()
                self.global_step += 1
                if self.global_step % self.args.logging_steps == 0:
                    print({"loss": round(tr_loss.item(), 4), "epoch": epoch, "step": self.global_step})
            metrics = self.evaluate()
            print({**metrics, "epoch": epoch, "elapsed": round(time.time() - start, 1)})


def main():
    torch.manual_seed(0)
    train_dataset = WearableWindows(320, seed=1)
    eval_dataset = WearableWindows(160, seed=2)
    model = SensorTransformerForClassification()
    args = TrainingArguments()
    trainer = Trainer(model=model, args=args, train_dataset=train_dataset, eval_dataset=eval_dataset)
    trainer.train()


if __name__ == "__main__":
    main()
