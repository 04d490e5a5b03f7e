"""K-FAC (KFAC-Pytorch style) training a small CNN on synthetic 12x12 template images."""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(0)


def _extract_patches(x, kernel_size, stride, padding):
    if padding[0] + padding[1] > 0:
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0])).data
    x = x.unfold(2, kernel_size[0], stride[0])
    x = x.unfold(3, kernel_size[1], stride[1])
    x = x.transpose_(1, 2).transpose_(2, 3).contiguous()
    x = x.view(x.size(0), x.size(1), x.size(2), x.size(3) * x.size(4) * x.size(5))
    return x


def update_running_stat(aa, m_aa, stat_decay):
    m_aa *= stat_decay / (1 - stat_decay)
    m_aa += aa
    m_aa *= (1 - stat_decay)


def compute_cov_a(a, layer):
    batch_size = a.size(0)
    if isinstance(layer, nn.Conv2d):
        a = _extract_patches(a, layer.kernel_size, layer.stride, layer.padding)
        spatial_size = a.size(1) * a.size(2)
        a = a.view(-1, a.size(-1))
        if layer.bias is not None:
            a = torch.cat([a, a.new(a.size(0), 1).fill_(1)], 1)
        a = a / spatial_size
        return a.t() @ (a / batch_size)
    if layer.bias is not None:
        a = torch.cat([a, a.new(a.size(0), 1).fill_(1)], 1)
    return a.t() @ (a / batch_size)


def compute_cov_g(g, layer, batch_averaged):
    batch_size = g.shape[0]
    if isinstance(layer, nn.Conv2d):
        spatial_size = g.size(2) * g.size(3)
        g = g.transpose(1, 2).transpose(2, 3).contiguous()
        g = g.view(-1, g.size(-1))
        if batch_averaged:
            g = g * batch_size
        g = g * spatial_size
        return g.t() @ (g / g.size(0))
    if batch_averaged:
        return g.t() @ (g * batch_size)
    return g.t() @ (g / batch_size)


class KFACOptimizer(optim.Optimizer):
    def __init__(self, model, lr=0.001, momentum=0.9, stat_decay=0.95, damping=0.001,
                 kl_clip=0.001, weight_decay=0, TCov=10, TInv=100, batch_averaged=True):
        defaults = dict(lr=lr, momentum=momentum, damping=damping, weight_decay=weight_decay)
        super(KFACOptimizer, self).__init__(model.parameters(), defaults)
        self.batch_averaged = batch_averaged
        self.known_modules = {'Linear', 'Conv2d'}
        self.modules = []
        self.model = model
        self.acc_stats = False
        self._prepare_model()
        self.steps = 0
        self.m_aa, self.m_gg = {}, {}
        self.Q_a, self.Q_g = {}, {}
        self.d_a, self.d_g = {}, {}
        self.stat_decay = stat_decay
        self.kl_clip = kl_clip
        self.TCov = TCov
        self.TInv = TInv

    def _save_input(self, module, input):
        if torch.is_grad_enabled() and self.steps % self.TCov == 0:
            aa = compute_cov_a(input[0].data, module)
            if self.steps == 0:
                self.m_aa[module] = torch.diag(aa.new(aa.size(0)).fill_(1))
            update_running_stat(aa, self.m_aa[module], self.stat_decay)

    def _save_grad_output(self, module, grad_input, grad_output):
        if self.acc_stats and self.steps % self.TCov == 0:
            gg = compute_cov_g(grad_output[0].data, module, self.batch_averaged)
            if self.steps == 0:
                self.m_gg[module] = torch.diag(gg.new(gg.size(0)).fill_(1))
            update_running_stat(gg, self.m_gg[module], self.stat_decay)

    def _prepare_model(self):
        for module in self.model.modules():
            if module.__class__.__name__ in self.known_modules:
                self.modules.append(module)
                module.register_forward_pre_hook(self._save_input)
                module.register_full_backward_hook(self._save_grad_output)

    def _update_inv(self, m):
        eps = 1e-10
        self.d_a[m], self.Q_a[m] = torch.linalg.eigh(self.m_aa[m])
        self.d_g[m], self.Q_g[m] = torch.linalg.eigh(self.m_gg[m])
        self.d_a[m].mul_((self.d_a[m] > eps).float())
        self.d_g[m].mul_((self.d_g[m] > eps).float())

    @staticmethod
    def _get_matrix_form_grad(m, classname):
        if classname == 'Conv2d':
            p_grad_mat = m.weight.grad.data.view(m.weight.grad.data.size(0), -1)
        else:
            p_grad_mat = m.weight.grad.data
        if m.bias is not None:
            p_grad_mat = torch.cat([p_grad_mat, m.bias.grad.data.view(-1, 1)], 1)
        return p_grad_mat

    def _get_natural_grad(self, m, p_grad_mat, damping):
        v1 = self.Q_g[m].t() @ p_grad_mat @ self.Q_a[m]
        v2 = v1 / (self.d_g[m].unsqueeze(1) * self.d_a[m].unsqueeze(0) + damping)
        v = self.Q_g[m] @ v2 @ self.Q_a[m].t()
        if m.bias is not None:
            v = [v[:, :-1], v[:, -1:]]
            v[0] = v[0].view(m.weight.grad.data.size())
            v[1] = v[1].view(m.bias.grad.data.size())
        else:
            v = [v.view(m.weight.grad.data.size())]
        return v

    def _kl_clip_and_update_grad(self, updates, lr):
        vg_sum = 0
        for m in self.modules:
            v = updates[m]
            vg_sum += (v[0] * m.weight.grad.data * lr ** 2).sum().item()
            if m.bias is not None:
                vg_sum += (v[1] * m.bias.grad.data * lr ** 2).sum().item()
        nu = min(1.0, math.sqrt(self.kl_clip / vg_sum))
        for m in self.modules:
            v = updates[m]
            m.weight.grad.data.copy_(v[0])
            m.weight.grad.data.mul_(nu)
            if m.bias is not None:
                m.bias.grad.data.copy_(v[1])
                m.bias.grad.data.mul_(nu)
        return nu

    def _step(self, closure):
        for group in self.param_groups:
            weight_decay = group['weight_decay']
            momentum = group['momentum']
            for p in group['params']:
                if p.grad is None:
                    continue
                d_p = p.grad.data
                if weight_decay != 0 and self.steps >= 20 * self.TCov:
                    d_p.add_(p.data, alpha=weight_decay)
                if momentum != 0:
                    param_state = self.state[p]
                    if 'momentum_buffer' not in param_state:
                        buf = param_state['momentum_buffer'] = torch.zeros_like(p.data)
                        buf.mul_(momentum).add_(d_p)
                    else:
                        buf = param_state['momentum_buffer']
                        buf.mul_(momentum).add_(d_p)
                    d_p = buf
                p.data.add_(d_p, alpha=-group['lr'])

    def step(self, closure=None):
        group = self.param_groups[0]
        lr = group['lr']
        damping = group['damping']
        updates = {}
        for m in self.modules:
            classname = m.__class__.__name__
            if self.steps % self.TInv == 0:
                self._update_inv(m)
            p_grad_mat = self._get_matrix_form_grad(m, classname)
            updates[m] = self._get_natural_grad(m, p_grad_mat, damping)
        self.nu = self._kl_clip_and_update_grad(updates, lr)
        self._step(closure)
        self.steps += 1


class TemplateImages(Dataset):
    def __init__(self, n, templates, seed):
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, templates.size(0), (n,), generator=g)
        shifts = torch.randint(-2, 3, (n, 2), generator=g)
        imgs = []
        for i in range(n):
            t = templates[self.y[i]]
            imgs.append(torch.roll(t, shifts=(int(shifts[i, 0]), int(shifts[i, 1])), dims=(1, 2)))
        self.x = torch.stack(imgs) + 0.6 * torch.randn(n, 1, 12, 12, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self, num_classes=8):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc1 = nn.Linear(16 * 3 * 3, 64)
        self.fc2 = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


tg = torch.Generator().manual_seed(123)
templates = F.avg_pool2d(torch.randn(8, 1, 14, 14, generator=tg), 3, stride=1)
trainset = TemplateImages(3000, templates, seed=1)
testset = TemplateImages(800, templates, seed=2)
trainloader = DataLoader(trainset, batch_size=100, shuffle=True)
testloader = DataLoader(testset, batch_size=200, shuffle=False)

net = Net()
criterion = nn.CrossEntropyLoss()
optimizer = KFACOptimizer(net, lr=0.01, momentum=0.9, stat_decay=0.95, damping=1e-3,
                          kl_clip=1e-3, weight_decay=3e-3, TCov=5, TInv=25)


def test(epoch):
    net.eval()
    test_loss, correct, total = 0, 0, 0
    with torch.no_grad():
        for inputs, targets in testloader:
            outputs = net(inputs)
            test_loss += criterion(outputs, targets).item() * targets.size(0)
            correct += outputs.argmax(1).eq(targets).sum().item()
            total += targets.size(0)
    print('epoch %d test loss %.4f acc %.3f' % (epoch, test_loss / total, correct / total))


def train(epoch):
    net.train()
    train_loss, correct, total = 0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        if optimizer.steps % optimizer.TCov == 0:
            optimizer.acc_stats = True
            with torch.no_grad():
                sampled_y = torch.multinomial(torch.nn.functional.softmax(outputs.cpu().data, dim=1), 1).squeeze()
            loss_sample = criterion(outputs, sampled_y)
            loss_sample.backward(retain_graph=True)
            optimizer.acc_stats = False
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        correct += outputs.argmax(1).eq(targets).sum().item()
        total += targets.size(0)
    print('epoch %d train loss %.4f acc %.3f (kl-clip nu %.3f, steps %d)' % (
        epoch, train_loss / (batch_idx + 1), correct / total, optimizer.nu, optimizer.steps))


test(0)
for epoch in range(1, 7):
    train(epoch)
    test(epoch)
