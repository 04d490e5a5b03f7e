"""Semi-supervised classification of machine-sensor embeddings with FixMatch.

A small USB-style code base: an AlgorithmBase with a hook system (parameter update, EMA), a
FixMatch algorithm whose train_step returns the losses, and a lightweight `Trainer` that
drives any algorithm on a labeled and an unlabeled loader and evaluates after every epoch.
48 labeled and 4800 unlabeled 32-d feature vectors, 6 classes.
"""
import math
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, RandomSampler

torch.manual_seed(0)


# ----------------------------------------------------------------------------- data
def make_features(n, seed, num_classes=6, dim=32):
    g = torch.Generator().manual_seed(1234)
    centers = 1.0 * torch.randn(num_classes, dim, generator=g)
    mix = torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = centers[y] + 0.9 * torch.randn(n, dim, generator=g)
    x = torch.tanh(x @ mix) * 3 + 0.1 * torch.randn(n, dim, generator=g)
    return x, y


def weak_aug(x):
    return x + 0.1 * torch.randn_like(x)


def strong_aug(x):
    keep = (torch.rand_like(x) > 0.3).float()
    return (x + 0.4 * torch.randn_like(x)) * keep


class BasicDataset(Dataset):
    def __init__(self, x, y=None, is_ulb=False):
        self.x, self.y, self.is_ulb = x, y, is_ulb

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.is_ulb:
            return {"x_ulb_w": weak_aug(self.x[i]), "x_ulb_s": strong_aug(self.x[i])}
        return {"x_lb": weak_aug(self.x[i]), "y_lb": self.y[i]}


class EvalDataset(BasicDataset):
    def __getitem__(self, i):
        return {"x_lb": self.x[i], "y_lb": self.y[i]}


# ----------------------------------------------------------------------------- model
class MLPNet(nn.Module):
    def __init__(self, dim=32, hidden=128, num_classes=6):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                      nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, num_classes)

    def forward(self, x):
        feat = self.backbone(x)
        return {"logits": self.classifier(feat), "feat": feat}


class EMA:
    def __init__(self, model, decay):
        self.model, self.decay = model, decay
        self.shadow, self.backup = {}, {}

    def register(self):
        for name, p in self.model.named_parameters():
            self.shadow[name] = p.data.clone()

    def update(self):
        for name, p in self.model.named_parameters():
            self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p.data

    def apply_shadow(self):
        for name, p in self.model.named_parameters():
            self.backup[name] = p.data
            p.data = self.shadow[name]

    def restore(self):
        for name, p in self.model.named_parameters():
            p.data = self.backup[name]
        self.backup = {}


# ----------------------------------------------------------------------------- hooks
class Hook:
    def before_train_step(self, algorithm):
        pass

    def after_train_step(self, algorithm):
        pass


class ParamUpdateHook(Hook):
    def after_train_step(self, algorithm):
        loss = algorithm.out_dict["loss"]
        loss.backward()
        if algorithm.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(algorithm.model.parameters(), algorithm.clip_grad)
        algorithm.optimizer.step()
        if algorithm.scheduler is not None:
            algorithm.scheduler.step()
        algorithm.model.zero_grad()


class EMAHook(Hook):
    def after_train_step(self, algorithm):
        if algorithm.ema is not None:
            algorithm.ema.update()


def get_cosine_schedule_with_warmup(optimizer, num_training_steps, num_cycles=7.0 / 16.0, num_warmup_steps=0):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0.0, math.cos(math.pi * num_cycles * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda)


# ----------------------------------------------------------------------------- algorithms
class AlgorithmBase:
    def __init__(self, args, net_builder):
        self.args = args
        self.num_train_iter = args.num_train_iter
        self.clip_grad = args.clip_grad
        self.ema_m = args.ema_m
        self.lambda_u = args.ulb_loss_ratio
        self.model = net_builder()
        self.ema = None
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=args.momentum,
                                         weight_decay=args.weight_decay, nesterov=True)
        self.scheduler = get_cosine_schedule_with_warmup(self.optimizer, args.num_train_iter,
                                                         num_warmup_steps=args.num_warmup_iter)
        self.it = 0
        self.out_dict, self.log_dict = None, None
        self._hooks = {"ParamUpdateHook": ParamUpdateHook(), "EMAHook": EMAHook()}

    def call_hook(self, fn_name, hook_name=None, *args, **kwargs):
        if hook_name is not None:
            return getattr(self._hooks[hook_name], fn_name)(self, *args, **kwargs)
        for hook in self._hooks.values():
            getattr(hook, fn_name)(self, *args, **kwargs)

    def process_batch(self, **kwargs):
        return kwargs

    def train_step(self, **kwargs):
        raise NotImplementedError


class FixMatch(AlgorithmBase):
    def __init__(self, args, net_builder):
        super().__init__(args, net_builder)
        self.T, self.p_cutoff = args.T, args.p_cutoff

    def train_step(self, x_lb, y_lb, x_ulb_w, x_ulb_s):
        num_lb = y_lb.shape[0]
        outputs = self.model(torch.cat((x_lb, x_ulb_w, x_ulb_s)))
        logits_x_lb = outputs["logits"][:num_lb]
        logits_x_ulb_w, logits_x_ulb_s = outputs["logits"][num_lb:].chunk(2)

        sup_loss = F.cross_entropy(logits_x_lb, y_lb)
        probs_x_ulb_w = torch.softmax(logits_x_ulb_w.detach() / self.T, dim=-1)
        max_probs, pseudo_label = probs_x_ulb_w.max(dim=-1)
        mask = max_probs.ge(self.p_cutoff).float()
        unsup_loss = (F.cross_entropy(logits_x_ulb_s, pseudo_label, reduction="none") * mask).mean()
        total_loss = sup_loss + self.lambda_u * unsup_loss

        out_dict = {"loss": total_loss, "feat": outputs["feat"]}
        log_dict = {"train/sup_loss": sup_loss.item(), "train/unsup_loss": unsup_loss.item(),
                    "train/total_loss": total_loss.item(), "train/mask_ratio": mask.mean().item()}
        return out_dict, log_dict


# ----------------------------------------------------------------------------- trainer
class Trainer:
    def __init__(self, config, algorithm):
        self.config = config
        self.algorithm = algorithm

    def fit(self, train_lb_loader, train_ulb_loader, eval_loader):
        self.algorithm.model.train()
        self.algorithm.ema = EMA(self.algorithm.model, self.algorithm.ema_m)
        self.algorithm.ema.register()
        self.algorithm.it = 0
        best_acc, best_epoch = 0.0, 0

        for epoch in range(self.config.epoch):
            if self.algorithm.it >= self.config.num_train_iter:
                break
            self.algorithm.model.train()
            for data_lb, data_ulb in zip(train_lb_loader, train_ulb_loader):
                if self.algorithm.it >= self.config.num_train_iter:
                    break
                self.algorithm.out_dict, self.algorithm.log_dict = self.algorithm.train_step(
                    **self.algorithm.process_batch(**data_lb, **data_ulb))
                if self.algorithm.it % 20 == 0:
                    log = self.algorithm.log_dict
                    print(f"iter {self.algorithm.it:4d}  sup_loss {log['train/sup_loss']:.4f}  "
                          f"unsup_loss {log['train/unsup_loss']:.4f}  mask {log['train/mask_ratio']:.2f}  "
                          f"lr {self.algorithm.optimizer.param_groups[0]['lr']:.4f}")
                self.algorithm.it += 1

            result = self.evaluate(eval_loader)
            print(f"epoch {epoch}  eval acc {result['acc']:.4f}  macro-F1 {result['f1']:.4f}")
            if result["acc"] > best_acc:
                best_acc, best_epoch = result["acc"], epoch
        print(f"Best acc {best_acc:.4f} at epoch {best_epoch}")

    def evaluate(self, data_loader, num_classes=6):
        self.algorithm.model.eval()
        y_true, y_pred = [], []
        with torch.no_grad():
            for data in data_loader:
                logits = self.algorithm.model(data["x_lb"])["logits"]
                y_true.append(data["y_lb"])
                y_pred.append(logits.argmax(dim=-1))
        self.algorithm.model.train()
        y_true, y_pred = torch.cat(y_true), torch.cat(y_pred)
        f1s = []
        for c in range(num_classes):
            tp = ((y_pred == c) & (y_true == c)).sum().item()
            fp = ((y_pred == c) & (y_true != c)).sum().item()
            fn = ((y_pred != c) & (y_true == c)).sum().item()
            f1s.append(2 * tp / max(1, 2 * tp + fp + fn))
        return {"acc": (y_true == y_pred).float().mean().item(), "f1": sum(f1s) / num_classes}


def main():
    config = SimpleNamespace(epoch=5, num_train_iter=200, num_warmup_iter=0, batch_size=16, uratio=3,
                             lr=0.03, momentum=0.9, weight_decay=5e-4, clip_grad=0.0, ema_m=0.999,
                             ulb_loss_ratio=1.0, T=1.0, p_cutoff=0.95, num_classes=6)
    iters_per_epoch = config.num_train_iter // config.epoch

    x, y = make_features(6000, seed=0)
    lb_idx = torch.cat([torch.nonzero(y[:4800] == c).flatten()[:8] for c in range(config.num_classes)])
    lb_dset = BasicDataset(x[lb_idx], y[lb_idx])
    ulb_dset = BasicDataset(x[:4800], is_ulb=True)
    eval_dset = EvalDataset(x[4800:], y[4800:])

    train_lb_loader = DataLoader(lb_dset, batch_size=config.batch_size, sampler=RandomSampler(
        lb_dset, replacement=True, num_samples=iters_per_epoch * config.batch_size))
    train_ulb_loader = DataLoader(ulb_dset, batch_size=config.batch_size * config.uratio, sampler=RandomSampler(
        ulb_dset, replacement=True, num_samples=iters_per_epoch * config.batch_size * config.uratio))
    eval_loader = DataLoader(eval_dset, batch_size=256)

    algorithm = FixMatch(config, lambda: MLPNet(num_classes=config.num_classes))
    trainer = Trainer(config, algorithm)
    trainer.fit(train_lb_loader, train_ulb_loader, eval_loader)


if __name__ == "__main__":
    main()
