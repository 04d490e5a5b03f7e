"""ViLT-style single-stream vision-and-language transformer for a small VQA task, PyTorch Lightning.

Image patches and question tokens are embedded, concatenated behind a [CLS] token and encoded by
one transformer; the pooled [CLS] feature is classified into the answer vocabulary.  The optimizer
and the polynomial-decay warm-up schedule come from set_schedule(), as in the original ViLT code
(vilt/modules/vilt_utils.py).
"""
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning.pytorch as pl
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset

config = {
    "learning_rate": 1e-3,
    "weight_decay": 0.01,
    "decay_power": 1,
    "end_lr": 0,
    "warmup_steps": 0.1,
    "optim_type": "adamw",
    "max_epoch": 3,
    "batch_size": 64,
    "hidden_size": 64,
    "num_layers": 2,
    "num_heads": 4,
    "vocab_size": 40,
    "num_patches": 16,
    "patch_dim": 48,
    "max_text_len": 8,
    "num_answers": 10,
}


def _polynomial_decay_lr_lambda(current_step, *, num_warmup_steps, num_training_steps, lr_end, power, lr_init):
    if current_step < num_warmup_steps:
        return float(current_step) / float(max(1, num_warmup_steps))
    elif current_step > num_training_steps:
        return lr_end / lr_init
    else:
        lr_range = lr_init - lr_end
        decay_steps = num_training_steps - num_warmup_steps
        pct_remaining = 1 - (current_step - num_warmup_steps) / decay_steps
        decay = lr_range * pct_remaining ** power + lr_end
        return decay / lr_init


def get_polynomial_decay_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, lr_end=1e-7, power=1.0):
    lr_init = optimizer.defaults["lr"]
    if not (lr_init > lr_end):
        raise ValueError(f"lr_end ({lr_end}) must be smaller than initial lr ({lr_init})")
    lr_lambda = partial(_polynomial_decay_lr_lambda, num_warmup_steps=num_warmup_steps,
                        num_training_steps=num_training_steps, lr_end=lr_end, power=power, lr_init=lr_init)
    return LambdaLR(optimizer, lr_lambda)


def set_schedule(pl_module):
    lr = pl_module.hparams.config["learning_rate"]
    wd = pl_module.hparams.config["weight_decay"]
    no_decay = ["bias", "norm"]
    end_lr = pl_module.hparams.config["end_lr"]
    decay_power = pl_module.hparams.config["decay_power"]

    optimizer_grouped_parameters = [
        {"params": [p for n, p in pl_module.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": wd},
        {"params": [p for n, p in pl_module.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = AdamW(optimizer_grouped_parameters, lr=lr, eps=1e-8, betas=(0.9, 0.98))

    if pl_module.trainer.max_steps is None:
        max_steps = (
            len(pl_module.trainer.datamodule.train_dataloader())
            * pl_module.trainer.max_epochs
            // pl_module.trainer.accumulate_grad_batches
        )
    else:
        max_steps = pl_module.trainer.max_steps

    warmup_steps = pl_module.hparams.config["warmup_steps"]
    if isinstance(pl_module.hparams.config["warmup_steps"], float):
        warmup_steps = int(max_steps * warmup_steps)

    scheduler = get_polynomial_decay_schedule_with_warmup(
        optimizer, num_warmup_steps=warmup_steps, num_training_steps=max_steps, lr_end=end_lr, power=decay_power,
    )
    sched = {"scheduler": scheduler, "interval": "step"}
    return [optimizer], [sched]


def make_vqa(n, cfg, seed):
    """Each image is a noisy rendering of one colour and one shape; the question asks for either."""
    g = torch.Generator().manual_seed(seed)
    d = cfg["patch_dim"] // 2
    colour_protos = torch.randn(5, d, generator=torch.Generator().manual_seed(100))
    shape_protos = torch.randn(5, d, generator=torch.Generator().manual_seed(101))
    colour = torch.randint(0, 5, (n,), generator=g)
    shape = torch.randint(0, 5, (n,), generator=g)
    patches = torch.cat([colour_protos[colour], shape_protos[shape]], dim=1)[:, None, :]
    patches = patches + 1.2 * torch.randn(n, cfg["num_patches"], cfg["patch_dim"], generator=g)
    qtype = torch.randint(0, 2, (n,), generator=g)
    text = torch.randint(4, cfg["vocab_size"], (n, cfg["max_text_len"]), generator=g)
    text[:, 0] = 1 + qtype  # "what colour ..." / "what shape ..."
    answer = torch.where(qtype == 0, colour, 5 + shape)
    return patches, text, answer


class VQADataModule(pl.LightningDataModule):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg

    def setup(self, stage=None):
        self.train_ds = TensorDataset(*make_vqa(3072, self.cfg, seed=0))
        self.val_ds = TensorDataset(*make_vqa(1024, self.cfg, seed=1))

    def train_dataloader(self):
        return DataLoader(self.train_ds, batch_size=self.cfg["batch_size"], shuffle=True)

    def val_dataloader(self):
        return DataLoader(self.val_ds, batch_size=256)


class ViLTransformerSS(pl.LightningModule):
    def __init__(self, config):
        super().__init__()
        self.save_hyperparameters()
        h = config["hidden_size"]
        self.text_embeddings = nn.Embedding(config["vocab_size"], h)
        self.text_pos = nn.Parameter(torch.zeros(1, config["max_text_len"], h))
        self.patch_embed = nn.Linear(config["patch_dim"], h)
        self.patch_pos = nn.Parameter(torch.zeros(1, config["num_patches"], h))
        self.token_type_embeddings = nn.Embedding(2, h)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, h))
        layer = nn.TransformerEncoderLayer(h, config["num_heads"], 4 * h, dropout=0.1, batch_first=True,
                                           norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, config["num_layers"])
        self.norm = nn.LayerNorm(h)
        self.pooler = nn.Sequential(nn.Linear(h, h), nn.Tanh())
        self.vqa_classifier = nn.Sequential(nn.Linear(h, 2 * h), nn.LayerNorm(2 * h), nn.GELU(),
                                            nn.Linear(2 * h, config["num_answers"]))
        nn.init.trunc_normal_(self.text_pos, std=0.02)
        nn.init.trunc_normal_(self.patch_pos, std=0.02)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def forward(self, patches, text):
        t = self.text_embeddings(text) + self.text_pos + self.token_type_embeddings.weight[0]
        v = self.patch_embed(patches) + self.patch_pos + self.token_type_embeddings.weight[1]
        x = torch.cat([self.cls_token.expand(len(text), -1, -1), t, v], dim=1)
        x = self.norm(self.transformer(x))
        return self.vqa_classifier(self.pooler(x[:, 0]))

    def training_step(self, batch, batch_idx):
        patches, text, answer = batch
        logits = self(patches, text)
        loss = F.cross_entropy(logits, answer)
        if self.global_step % 16 == 0:
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            print(f"step {self.global_step:4d}  vqa loss {loss.item():.4f}  lr {lr:.2e}")
        return loss

    def validation_step(self, batch, batch_idx):
        patches, text, answer = batch
        logits = self(patches, text)
        self.log("val/vqa_loss", F.cross_entropy(logits, answer), prog_bar=False)
        self.log("val/vqa_acc", (logits.argmax(-1) == answer).float().mean(), prog_bar=False)

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            m = self.trainer.callback_metrics
            print(f"epoch {self.current_epoch}  val loss {m['val/vqa_loss']:.4f}  val acc {m['val/vqa_acc']:.3f}")

    def configure_optimizers(self):
        return set_schedule(self)


def main():
    pl.seed_everything(0)
    model = ViLTransformerSS(config)
    trainer = pl.Trainer(
        max_epochs=config["max_epoch"],
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=VQADataModule(config))


if __name__ == "__main__":
    main()
