"""CycleGAN between two 2-D point "domains", following junyanz/pytorch-CycleGAN-and-pix2pix.

Domain A is a pair of round Gaussian blobs on the x axis, domain B a pair of elongated blobs on the y axis.
Two generators (G_A: A->B, G_B: B->A) and two discriminators with the LSGAN loss, cycle loss
(lambda 10) and no identity loss (lambda_identity 0), the discriminators fed from a 50-sample ImagePool
of older fakes, Adam(2e-4, beta1 0.5) and the repository's linear-decay LambdaLR rule.
"""
import itertools
import random

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
random.seed(0)

opt = dict(n_epochs=4, n_epochs_decay=4, lr=2e-4, beta1=0.5, lambda_A=10.0, lambda_B=10.0,
           lambda_identity=0.0, pool_size=50, batch_size=32, epoch_count=1)


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size
        if self.pool_size > 0:
            self.num_imgs = 0
            self.images = []

    def query(self, images):
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs = self.num_imgs + 1
                self.images.append(image)
                return_images.append(image)
            else:
                p = random.uniform(0, 1)
                if p > 0.5:
                    random_id = random.randint(0, self.pool_size - 1)
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
        return_images = torch.cat(return_images, 0)
        return return_images


class GANLoss(nn.Module):
    def __init__(self, target_real_label=1.0, target_fake_label=0.0):
        super().__init__()
        self.register_buffer('real_label', torch.tensor(target_real_label))
        self.register_buffer('fake_label', torch.tensor(target_fake_label))
        self.loss = nn.MSELoss()

    def __call__(self, prediction, target_is_real):
        target = self.real_label if target_is_real else self.fake_label
        return self.loss(prediction, target.expand_as(prediction))


def define_G():
    return nn.Sequential(nn.Linear(2, 64), nn.ReLU(True), nn.Linear(64, 64), nn.ReLU(True), nn.Linear(64, 2))


def define_D():
    return nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2, True), nn.Linear(64, 64),
                         nn.LeakyReLU(0.2, True), nn.Linear(64, 1))


def set_requires_grad(nets, requires_grad=False):
    for net in nets:
        for param in net.parameters():
            param.requires_grad = requires_grad


def sample_A(n, g):
    c = torch.tensor([[-2.0, 0.0], [2.0, 0.0]])
    k = torch.randint(0, 2, (n,), generator=g)
    return c[k] + 0.3 * torch.randn(n, 2, generator=g)


def sample_B(n, g):
    c = torch.tensor([[0.0, 2.0], [0.0, -2.0]])
    k = torch.randint(0, 2, (n,), generator=g)
    return c[k] + torch.tensor([0.15, 0.5]) * torch.randn(n, 2, generator=g)


class UnalignedDataset(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.A = sample_A(n, g)
        self.B = sample_B(n, g)
        self.perm = torch.randperm(n, generator=g)

    def __len__(self):
        return len(self.A)

    def __getitem__(self, i):
        return {'A': self.A[i], 'B': self.B[self.perm[i]]}


def mmd(x, y, sigma=1.0):
    def k(a, b):
        return torch.exp(-torch.cdist(a, b) ** 2 / (2 * sigma ** 2))
    return (k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean()).item()


netG_A, netG_B = define_G(), define_G()
netD_A, netD_B = define_D(), define_D()
fake_A_pool = ImagePool(opt['pool_size'])
fake_B_pool = ImagePool(opt['pool_size'])
criterionGAN = GANLoss()
criterionCycle = nn.L1Loss()
criterionIdt = nn.L1Loss()
optimizer_G = torch.optim.Adam(itertools.chain(netG_A.parameters(), netG_B.parameters()),
                               lr=opt['lr'], betas=(opt['beta1'], 0.999))
optimizer_D = torch.optim.Adam(itertools.chain(netD_A.parameters(), netD_B.parameters()),
                               lr=opt['lr'], betas=(opt['beta1'], 0.999))


def lambda_rule(epoch):
    return 1.0 - max(0, epoch + opt['epoch_count'] - opt['n_epochs']) / float(opt['n_epochs_decay'] + 1)


schedulers = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=lambda_rule) for o in (optimizer_G, optimizer_D)]

dataset = UnalignedDataset(1024, seed=1)
loader = DataLoader(dataset, batch_size=opt['batch_size'], shuffle=True, drop_last=True)
g_eval = torch.Generator().manual_seed(7)
eval_A, eval_B = sample_A(1000, g_eval), sample_B(1000, g_eval)


def report(tag):
    with torch.no_grad():
        fB, fA = netG_A(eval_A), netG_B(eval_B)
        rec = (netG_B(fB) - eval_A).abs().mean().item()
        print(f"{tag}: MMD(G_A(A), B) {mmd(fB, eval_B):.4f} MMD(G_B(B), A) {mmd(fA, eval_A):.4f} "
              f"cycle L1 {rec:.4f}")


report("init")
for epoch in range(opt['epoch_count'], opt['n_epochs'] + opt['n_epochs_decay'] + 1):
    sums = dict(G=0.0, D=0.0, cyc=0.0)
    for data in loader:
        real_A, real_B = data['A'], data['B']
        fake_B = netG_A(real_A)
        rec_A = netG_B(fake_B)
        fake_A = netG_B(real_B)
        rec_B = netG_A(fake_A)

        set_requires_grad([netD_A, netD_B], False)
        optimizer_G.zero_grad()
        lambda_idt, lambda_A, lambda_B = opt['lambda_identity'], opt['lambda_A'], opt['lambda_B']
        if lambda_idt > 0:
            idt_A = netG_A(real_B)
            loss_idt_A = criterionIdt(idt_A, real_B) * lambda_B * lambda_idt
            idt_B = netG_B(real_A)
            loss_idt_B = criterionIdt(idt_B, real_A) * lambda_A * lambda_idt
        else:
            loss_idt_A = 0
            loss_idt_B = 0
        loss_G_A = criterionGAN(netD_A(fake_B), True)
        loss_G_B = criterionGAN(netD_B(fake_A), True)
        loss_cycle_A = criterionCycle(rec_A, real_A) * lambda_A
        loss_cycle_B = criterionCycle(rec_B, real_B) * lambda_B
        loss_G = loss_G_A + loss_G_B + loss_cycle_A + loss_cycle_B + loss_idt_A + loss_idt_B
        loss_G.backward()
        optimizer_G.step()

        set_requires_grad([netD_A, netD_B], True)
        optimizer_D.zero_grad()
        fake_B_q = fake_B_pool.query(fake_B)
        loss_D_A = (criterionGAN(netD_A(real_B), True) + criterionGAN(netD_A(fake_B_q.detach()), False)) * 0.5
        loss_D_A.backward()
        fake_A_q = fake_A_pool.query(fake_A)
        loss_D_B = (criterionGAN(netD_B(real_A), True) + criterionGAN(netD_B(fake_A_q.detach()), False)) * 0.5
        loss_D_B.backward()
        optimizer_D.step()

        sums['G'] += (loss_G_A + loss_G_B).item()
        sums['D'] += (loss_D_A + loss_D_B).item()
        sums['cyc'] += (loss_cycle_A + loss_cycle_B).item()
    for s in schedulers:
        s.step()
    n = len(loader)
    print(f"epoch {epoch}: G_gan {sums['G'] / n:.4f} D {sums['D'] / n:.4f} cycle {sums['cyc'] / n:.4f} "
          f"lr {schedulers[0].get_last_lr()[0]:.6f}")
    report(f"  eval after epoch {epoch}")
