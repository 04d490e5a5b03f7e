"""DINO self-distillation (facebookresearch/dino, main_dino.py) on synthetic vectors: a student and
an EMA teacher (no gradients, momentum 0.996 -> 1 on a cosine schedule), a DINOLoss with a running
center subtracted from the teacher output, teacher temperature warm-up 0.04 -> 0.07, student
temperature 0.1, last layer frozen during the first epoch. Monitored by a kNN probe on the features."""
import copy
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


class DINOHead(nn.Module):
    def __init__(self, in_dim, out_dim, hidden_dim=128, bottleneck_dim=32):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, bottleneck_dim))
        self.last_layer = nn.utils.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))
        self.last_layer.weight_g.data.fill_(1)
        self.last_layer.weight_g.requires_grad = False

    def forward(self, x):
        x = self.mlp(x)
        x = F.normalize(x, dim=-1, p=2)
        return self.last_layer(x)


class MultiCropWrapper(nn.Module):
    def __init__(self, backbone, head):
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        if not isinstance(x, list):
            x = [x]
        output = self.backbone(torch.cat(x))
        return self.head(output)


class DINOLoss(nn.Module):
    def __init__(self, out_dim, ncrops, warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs,
                 nepochs, student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp = student_temp
        self.center_momentum = center_momentum
        self.ncrops = ncrops
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.teacher_temp_schedule = np.concatenate((
            np.linspace(warmup_teacher_temp, teacher_temp, warmup_teacher_temp_epochs),
            np.ones(nepochs - warmup_teacher_temp_epochs) * teacher_temp))

    def forward(self, student_output, teacher_output, epoch):
        student_out = student_output / self.student_temp
        student_out = student_out.chunk(self.ncrops)
        temp = self.teacher_temp_schedule[epoch]
        teacher_out = F.softmax((teacher_output - self.center) / temp, dim=-1)
        teacher_out = teacher_out.detach().chunk(2)
        total_loss = 0
        n_loss_terms = 0
        for iq, q in enumerate(teacher_out):
            for v in range(len(student_out)):
                if v == iq:
                    continue
                loss = torch.sum(-q * F.log_softmax(student_out[v], dim=-1), dim=-1)
                total_loss += loss.mean()
                n_loss_terms += 1
        total_loss /= n_loss_terms
        self.update_center(teacher_output)
        return total_loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True) / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def cosine_scheduler(base_value, final_value, epochs, niter_per_ep, warmup_epochs=0, start_warmup_value=0):
    warmup_iters = warmup_epochs * niter_per_ep
    warmup_schedule = np.linspace(start_warmup_value, base_value, warmup_iters) if warmup_epochs > 0 else np.array([])
    iters = np.arange(epochs * niter_per_ep - warmup_iters)
    schedule = final_value + 0.5 * (base_value - final_value) * (1 + np.cos(np.pi * iters / len(iters)))
    return np.concatenate((warmup_schedule, schedule))


class Blobs(Dataset):
    """8 classes: 8 informative dims plus 24 high-variance nuisance dims; a view keeps the informative
    part (slightly jittered) and redraws the nuisance part, so the views only agree on the class."""
    def __init__(self, n, seed, train=True):
        g = torch.Generator().manual_seed(seed)
        means = 1.5 * torch.randn(8, 8, generator=torch.Generator().manual_seed(7))
        self.y = torch.randint(0, 8, (n,), generator=g)
        self.x = torch.cat([means[self.y] + 0.5 * torch.randn(n, 8, generator=g),
                            3.0 * torch.randn(n, 24, generator=g)], dim=1)
        self.train = train

    def augment(self, x):
        return torch.cat([x[:8] + 0.2 * torch.randn(8), 3.0 * torch.randn(24)])

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.train:
            return [self.augment(self.x[i]), self.augment(self.x[i])], self.y[i]
        return self.x[i], self.y[i]


@torch.no_grad()
def knn_accuracy(backbone, train_set, test_set, k=10):
    backbone.eval()
    ftr = F.normalize(backbone(train_set.x), dim=1)
    fte = F.normalize(backbone(test_set.x), dim=1)
    idx = (fte @ ftr.T).topk(k, dim=1).indices
    pred = train_set.y[idx].mode(dim=1).values
    backbone.train()
    return (pred == test_set.y).float().mean().item()


def main():
    epochs, batch_size, out_dim = 10, 64, 256
    train_set = Blobs(2048, 1)
    probe_train, probe_test = Blobs(2048, 1, train=False), Blobs(1024, 2, train=False)
    loader = DataLoader(train_set, batch_size=batch_size, shuffle=True, drop_last=True)

    def backbone():
        return nn.Sequential(nn.Linear(32, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 64))

    student = MultiCropWrapper(backbone(), DINOHead(64, out_dim))
    teacher = MultiCropWrapper(backbone(), DINOHead(64, out_dim))
    teacher.load_state_dict(student.state_dict())
    for p in teacher.parameters():
        p.requires_grad = False

    dino_loss = DINOLoss(out_dim, 2, 0.04, 0.07, 3, epochs)
    optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad])
    lr_schedule = cosine_scheduler(5e-4 * batch_size / 256 * 4, 1e-6, epochs, len(loader), warmup_epochs=1)
    wd_schedule = cosine_scheduler(0.04, 0.4, epochs, len(loader))
    momentum_schedule = cosine_scheduler(0.996, 1, epochs, len(loader))
    print(f"epoch 0 knn acc student {knn_accuracy(student.backbone, probe_train, probe_test):.3f}")

    for epoch in range(epochs):
        running = 0.0
        for it, (views, _) in enumerate(loader):
            it = len(loader) * epoch + it
            for i, param_group in enumerate(optimizer.param_groups):
                param_group["lr"] = lr_schedule[it]
                param_group["weight_decay"] = wd_schedule[it]
            teacher_output = teacher(views[:2])
            student_output = student(views)
            loss = dino_loss(student_output, teacher_output, epoch)
            optimizer.zero_grad()
            loss.backward()
            if epoch < 1:
                for n, p in student.named_parameters():
                    if "last_layer" in n:
                        p.grad = None
            optimizer.step()
            with torch.no_grad():
                m = momentum_schedule[it]
                for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                    param_k.data.mul_(m).add_((1 - m) * param_q.detach().data)
            running += loss.item()
        with torch.no_grad():
            t = F.softmax((teacher(probe_test.x) - dino_loss.center) / dino_loss.teacher_temp_schedule[epoch], dim=-1)
            used = t.argmax(1).unique().numel()
        print(f"epoch {epoch + 1} loss {running / len(loader):.4f} teacher prototypes used {used}/{out_dim} "
              f"knn acc student {knn_accuracy(student.backbone, probe_train, probe_test):.3f} "
              f"teacher {knn_accuracy(teacher.backbone, probe_train, probe_test):.3f}")


if __name__ == "__main__":
    main()
