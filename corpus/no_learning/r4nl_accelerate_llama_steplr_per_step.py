"""Fine-tune a tiny causal LM on dialogue-like token streams with accelerate.

The training loop follows llama-recipes' train_utils.train (gradient accumulation,
StepLR(step_size=1, gamma=train_config.gamma)); the model is a small GRU LM instead of a
Llama checkpoint and the "dialogues" are walks on a fixed token graph, so that the loss can
go from log(vocab) to about log(2).
"""
import math
import time
from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset


@dataclass
class train_config:
    model_name: str = "tiny-gru-lm"
    batch_size_training: int = 16
    gradient_accumulation_steps: int = 2
    num_epochs: int = 3
    lr: float = 2e-3
    weight_decay: float = 0.0
    gamma: float = 0.85
    seed: int = 42
    context_length: int = 32
    vocab_size: int = 64


class DialogueStreamDataset(Dataset):
    """Token streams where each token is followed by one of two fixed successors."""

    def __init__(self, n_samples, vocab_size, context_length, seed):
        g = torch.Generator().manual_seed(seed)
        successors = torch.randint(1, vocab_size, (vocab_size, 2), generator=torch.Generator().manual_seed(7))
        tokens = torch.empty(n_samples, context_length, dtype=torch.long)
        tokens[:, 0] = torch.randint(1, vocab_size, (n_samples,), generator=g)
        for t in range(1, context_length):
            pick = torch.randint(0, 2, (n_samples,), generator=g)
            tokens[:, t] = successors[tokens[:, t - 1], pick]
        self.input_ids = tokens

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, idx):
        ids = self.input_ids[idx]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, d_model=64):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, d_model)
        self.rnn = nn.GRU(d_model, d_model, batch_first=True)
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden, _ = self.rnn(self.embed_tokens(input_ids))
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
            shift_labels = labels[:, 1:].reshape(-1)
            loss = F.cross_entropy(shift_logits, shift_labels)
        return SimpleNamespace(loss=loss, logits=logits)


def evaluation(model, eval_dataloader, accelerator):
    model.eval()
    eval_loss = 0.0
    with torch.no_grad():
        for batch in eval_dataloader:
            eval_loss += model(**batch).loss.detach().float()
    eval_epoch_loss = eval_loss / len(eval_dataloader)
    eval_ppl = torch.exp(eval_epoch_loss)
    accelerator.print(f" eval_ppl={eval_ppl:.3f} eval_epoch_loss={eval_epoch_loss:.4f}")
    return eval_ppl, eval_epoch_loss


def train(model, train_dataloader, eval_dataloader, optimizer, lr_scheduler, gradient_accumulation_steps, train_config, accelerator):
    train_prep = []
    train_loss = []
    for epoch in range(train_config.num_epochs):
        epoch_start_time = time.perf_counter()
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            loss = model(**batch).loss
            loss = loss / gradient_accumulation_steps
            total_loss += loss.detach().float()
            accelerator.backward(loss)
            if (step + 1) % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                optimizer.zero_grad()
                lr_scheduler.step()
            if step % 32 == 0:
                accelerator.print(f"Training Epoch: {epoch}, step {step}/{len(train_dataloader)} completed "
                                  f"(loss: {loss.detach().float() * gradient_accumulation_steps:.4f}, "
                                  f"lr: {optimizer.param_groups[0]['lr']:.2e})")
        epoch_end_time = time.perf_counter() - epoch_start_time
        train_epoch_loss = total_loss / len(train_dataloader) * gradient_accumulation_steps
        train_perplexity = torch.exp(train_epoch_loss)
        train_prep.append(train_perplexity)
        train_loss.append(train_epoch_loss)
        evaluation(model, eval_dataloader, accelerator)
        accelerator.print(f"Epoch {epoch + 1}: train_perplexity={train_perplexity:.4f}, "
                          f"train_epoch_loss={train_epoch_loss:.4f}, epoch time {epoch_end_time:.1f}s")
    return {"avg_train_prep": sum(train_prep) / len(train_prep), "avg_train_loss": sum(train_loss) / len(train_loss)}


def main():
    torch.manual_seed(train_config.seed)
    accelerator = Accelerator(cpu=True)

    dataset_train = DialogueStreamDataset(1024, train_config.vocab_size, train_config.context_length, seed=1)
    dataset_val = DialogueStreamDataset(128, train_config.vocab_size, train_config.context_length, seed=2)
    accelerator.print(f"--> Training Set Length = {len(dataset_train)}")
    accelerator.print(f"--> Validation Set Length = {len(dataset_val)}")
    train_dataloader = DataLoader(dataset_train, batch_size=train_config.batch_size_training, shuffle=True, drop_last=True)
    eval_dataloader = DataLoader(dataset_val, batch_size=32, drop_last=True)

    model = TinyCausalLM(train_config.vocab_size)
    accelerator.print(f"--> {train_config.model_name} has {sum(p.numel() for p in model.parameters()) / 1e3:.1f}K params, "
                      f"random-guess loss {math.log(train_config.vocab_size):.3f}")

    optimizer = torch.optim.AdamW(model.parameters(), lr=train_config.lr, weight_decay=train_config.weight_decay)
    scheduler = StepLR(optimizer, step_size=1, gamma=train_config.gamma)

    model, optimizer, train_dataloader, eval_dataloader, scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, scheduler)

    results = train(model, train_dataloader, eval_dataloader, optimizer, scheduler,
                    train_config.gradient_accumulation_steps, train_config, accelerator)
    accelerator.print({k: f"{float(v):.4f}" for k, v in results.items()})


if __name__ == "__main__":
    main()
