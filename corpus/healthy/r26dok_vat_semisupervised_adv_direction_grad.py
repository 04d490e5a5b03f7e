"""Semi-supervised classification with Virtual Adversarial Training, following lyakaap/VAT-pytorch
(vat.py + train_MNIST.py): a small BN MLP is trained on 24 labelled points with cross-entropy plus
the VAT local-distribution-smoothness loss on the unlabelled pool. The adversarial direction is
found by one power-iteration step: a random unit vector d gets requires_grad, the KL between the
clean and the perturbed prediction is backpropagated to d, and d.grad (normalised) becomes the
direction; model.zero_grad() clears what that backward left on the weights."""
import contextlib
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset, DataLoader

torch.manual_seed(0)


def make_spirals(n, noise=0.25, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    t = 0.75 + 2.5 * math.pi * torch.rand(n, generator=g) / 2
    r = t
    ang = t + math.pi * y.float()
    x = torch.stack([r * torch.cos(ang), r * torch.sin(ang)], dim=1) / 2.0
    x = x + noise * torch.randn(x.shape, generator=g) / 2.0
    return x, y


@contextlib.contextmanager
def _disable_tracking_bn_stats(model):

    def switch_attr(m):
        if hasattr(m, 'track_running_stats'):
            m.track_running_stats ^= True

    model.apply(switch_attr)
    yield
    model.apply(switch_attr)


def _l2_normalize(d):
    d_reshaped = d.view(d.shape[0], -1, *(1 for _ in range(d.dim() - 2)))
    d /= torch.norm(d_reshaped, dim=1, keepdim=True) + 1e-8
    return d


class VATLoss(nn.Module):

    def __init__(self, xi=0.1, eps=0.2, ip=1):
        super(VATLoss, self).__init__()
        self.xi = xi
        self.eps = eps
        self.ip = ip

    def forward(self, model, x):
        with torch.no_grad():
            pred = F.softmax(model(x), dim=1)

        d = torch.rand(x.shape).sub(0.5).to(x.device)
        d = _l2_normalize(d)

        with _disable_tracking_bn_stats(model):
            for _ in range(self.ip):
                d.requires_grad_()
                pred_hat = model(x + self.xi * d)
                logp_hat = F.log_softmax(pred_hat, dim=1)
                adv_distance = F.kl_div(logp_hat, pred, reduction='batchmean')
                adv_distance.backward()
                d = _l2_normalize(d.grad)
                model.zero_grad()

            r_adv = d * self.eps
            pred_hat = model(x + r_adv)
            logp_hat = F.log_softmax(pred_hat, dim=1)
            lds = F.kl_div(logp_hat, pred, reduction='batchmean')

        return lds


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(2, 64)
        self.bn1 = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 64)
        self.bn2 = nn.BatchNorm1d(64)
        self.fc3 = nn.Linear(64, 2)

    def forward(self, x):
        x = F.relu(self.bn1(self.fc1(x)))
        x = F.relu(self.bn2(self.fc2(x)))
        return self.fc3(x)


x_all, y_all = make_spirals(2000, seed=0)
x_test, y_test = make_spirals(1000, seed=1)
labelled_idx = torch.cat([torch.nonzero(y_all == c).flatten()[:12] for c in range(2)])
labelled = TensorDataset(x_all[labelled_idx], y_all[labelled_idx])
unlabelled = TensorDataset(x_all)

labelled_loader = DataLoader(labelled, batch_size=24, shuffle=True)
unlabelled_loader = DataLoader(unlabelled, batch_size=128, shuffle=True, drop_last=True)

model = Net()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
vat_loss = VATLoss(xi=0.1, eps=0.2, ip=1)
alpha = 1.0


def test():
    model.eval()
    with torch.no_grad():
        out = model(x_test)
        acc = (out.argmax(1) == y_test).float().mean().item()
        loss = F.cross_entropy(out, y_test).item()
    model.train()
    return loss, acc


print('init: test loss {:.4f} acc {:.3f}'.format(*test()))
step = 0
for epoch in range(1, 13):
    ce_sum, lds_sum, n = 0.0, 0.0, 0
    for (x_u,) in unlabelled_loader:
        x_l, y_l = next(iter(labelled_loader))
        optimizer.zero_grad()

        lds = vat_loss(model, x_u)
        output = model(x_l)
        classification_loss = F.cross_entropy(output, y_l)
        loss = classification_loss + alpha * lds
        loss.backward()
        optimizer.step()

        ce_sum += classification_loss.item()
        lds_sum += lds.item()
        n += 1
        step += 1
    t_loss, t_acc = test()
    print('epoch {:2d} step {:4d}  ce {:.4f}  vat {:.4f}  test loss {:.4f}  test acc {:.3f}'.format(
        epoch, step, ce_sum / n, lds_sum / n, t_loss, t_acc))
