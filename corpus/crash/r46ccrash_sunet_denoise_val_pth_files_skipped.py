"""SUNet-style image denoising: train a small residual conv denoiser on noisy/clean patch pairs.

The data preparation step writes the train and validation pairs as tensors into
<root>/train/{input,target} and <root>/val/{input,target}; training uses L1 loss,
Adam with cosine annealing, and reports PSNR / SSIM on the validation set.
"""
import os
import random
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, Dataset

random.seed(1234)
np.random.seed(1234)
torch.manual_seed(1234)

opt = {
    'MODEL': {'MODE': 'Denoising'},
    'OPTIM': {'BATCH': 8, 'EPOCHS': 4, 'LR_INITIAL': 1e-3, 'LR_MIN': 1e-5},
    'TRAINING': {'VAL_AFTER_EVERY': 2, 'TRAIN_PS': 24, 'VAL_PS': 24},
}


def make_clean_image(size=36):
    yy, xx = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing='ij')
    img = torch.zeros(3, size, size)
    for c in range(3):
        fx, fy = random.uniform(1, 4), random.uniform(1, 4)
        ph = random.uniform(0, 6.28)
        img[c] = 0.5 + 0.35 * torch.sin(fx * 6.28 * xx + fy * 6.28 * yy + ph)
    cx, cy, r = random.uniform(0.2, 0.8), random.uniform(0.2, 0.8), random.uniform(0.1, 0.3)
    disk = ((xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2).float()
    img = img * (1 - disk) + disk * torch.rand(3, 1, 1)
    return img.clamp(0, 1)


def prepare_data(root, n_train=128, n_val=16, sigma=0.1):
    for split in ['train', 'val']:
        for sub in ['input', 'target']:
            os.makedirs(os.path.join(root, split, sub), exist_ok=True)
    for i in range(n_train):
        clean = make_clean_image()
        noisy = (clean + sigma * torch.randn_like(clean)).clamp(0, 1)
        torch.save(noisy, os.path.join(root, 'train', 'input', f'{i:04d}.pt'))
        torch.save(clean, os.path.join(root, 'train', 'target', f'{i:04d}.pt'))
    for i in range(n_val):
        clean = make_clean_image()
        noisy = (clean + sigma * torch.randn_like(clean)).clamp(0, 1)
        torch.save(noisy, os.path.join(root, 'val', 'input', f'val_{i:03d}.pth'))
        torch.save(clean, os.path.join(root, 'val', 'target', f'val_{i:03d}.pth'))


def is_image_file(filename):
    return any(filename.endswith(extension) for extension in ['.pt'])


class DataLoaderTrain(Dataset):
    def __init__(self, rgb_dir, img_options=None):
        super().__init__()
        inp_files = sorted(os.listdir(os.path.join(rgb_dir, 'input')))
        tar_files = sorted(os.listdir(os.path.join(rgb_dir, 'target')))
        self.inp_filenames = [os.path.join(rgb_dir, 'input', x) for x in inp_files if is_image_file(x)]
        self.tar_filenames = [os.path.join(rgb_dir, 'target', x) for x in tar_files if is_image_file(x)]
        self.sizex = len(self.tar_filenames)
        self.ps = img_options['patch_size']

    def __len__(self):
        return self.sizex

    def __getitem__(self, index):
        index_ = index % self.sizex
        ps = self.ps
        inp_img = torch.load(self.inp_filenames[index_])
        tar_img = torch.load(self.tar_filenames[index_])
        hh, ww = tar_img.shape[1], tar_img.shape[2]
        rr = random.randint(0, hh - ps)
        cc = random.randint(0, ww - ps)
        aug = random.randint(0, 3)
        inp_img = inp_img[:, rr:rr + ps, cc:cc + ps]
        tar_img = tar_img[:, rr:rr + ps, cc:cc + ps]
        if aug == 1:
            inp_img, tar_img = inp_img.flip(1), tar_img.flip(1)
        elif aug == 2:
            inp_img, tar_img = inp_img.flip(2), tar_img.flip(2)
        elif aug == 3:
            inp_img, tar_img = torch.rot90(inp_img, dims=(1, 2)), torch.rot90(tar_img, dims=(1, 2))
        return tar_img, inp_img


class DataLoaderVal(Dataset):
    def __init__(self, rgb_dir, img_options=None):
        super().__init__()
        inp_files = sorted(os.listdir(os.path.join(rgb_dir, 'input')))
        tar_files = sorted(os.listdir(os.path.join(rgb_dir, 'target')))
        self.inp_filenames = [os.path.join(rgb_dir, 'input', x) for x in inp_files if is_image_file(x)]
        self.tar_filenames = [os.path.join(rgb_dir, 'target', x) for x in tar_files if is_image_file(x)]
        self.sizex = len(self.tar_filenames)
        self.ps = img_options['patch_size']

    def __len__(self):
        return self.sizex

    def __getitem__(self, index):
        index_ = index % self.sizex
        ps = self.ps
        inp_img = torch.load(self.inp_filenames[index_])
        tar_img = torch.load(self.tar_filenames[index_])
        h, w = tar_img.shape[1:]
        top, left = (h - ps) // 2, (w - ps) // 2
        return tar_img[:, top:top + ps, left:left + ps], inp_img[:, top:top + ps, left:left + ps]


class ResBlock(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(F.gelu(self.conv1(x)))


class SmallDenoiser(nn.Module):
    def __init__(self, ch=24, n_blocks=2):
        super().__init__()
        self.head = nn.Conv2d(3, ch, 3, padding=1)
        self.body = nn.Sequential(*[ResBlock(ch) for _ in range(n_blocks)])
        self.tail = nn.Conv2d(ch, 3, 3, padding=1)

    def forward(self, x):
        return x + self.tail(self.body(F.gelu(self.head(x))))


def torchPSNR(tar_img, prd_img):
    imdff = torch.clamp(prd_img, 0, 1) - torch.clamp(tar_img, 0, 1)
    rmse = (imdff ** 2).mean().sqrt()
    return 20 * torch.log10(1 / rmse)


def torchSSIM(tar_img, prd_img, C1=0.01 ** 2, C2=0.03 ** 2):
    mu_x, mu_y = F.avg_pool2d(tar_img, 7, 1, 3), F.avg_pool2d(prd_img, 7, 1, 3)
    sxx = F.avg_pool2d(tar_img * tar_img, 7, 1, 3) - mu_x ** 2
    syy = F.avg_pool2d(prd_img * prd_img, 7, 1, 3) - mu_y ** 2
    sxy = F.avg_pool2d(tar_img * prd_img, 7, 1, 3) - mu_x * mu_y
    ssim = ((2 * mu_x * mu_y + C1) * (2 * sxy + C2)) / ((mu_x ** 2 + mu_y ** 2 + C1) * (sxx + syy + C2))
    return ssim.mean()


def main():
    Train = opt['TRAINING']
    OPT = opt['OPTIM']
    root = tempfile.mkdtemp(prefix='sunet_')
    prepare_data(root)
    model_dir = os.path.join(root, opt['MODEL']['MODE'], 'models')
    os.makedirs(model_dir, exist_ok=True)
    train_dir = os.path.join(root, 'train')
    val_dir = os.path.join(root, 'val')

    print('==> Build the model')
    model_restored = SmallDenoiser()
    p_number = sum(p.numel() for p in model_restored.parameters())

    new_lr = OPT['LR_INITIAL']
    optimizer = optim.Adam(model_restored.parameters(), lr=new_lr, betas=(0.9, 0.999), eps=1e-8)
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, OPT['EPOCHS'], eta_min=OPT['LR_MIN'])
    L1_loss = nn.L1Loss()

    print('==> Loading datasets')
    train_dataset = DataLoaderTrain(train_dir, {'patch_size': Train['TRAIN_PS']})
    train_loader = DataLoader(dataset=train_dataset, batch_size=OPT['BATCH'], shuffle=True, num_workers=0,
                              drop_last=False)
    val_dataset = DataLoaderVal(val_dir, {'patch_size': Train['VAL_PS']})
    val_loader = DataLoader(dataset=val_dataset, batch_size=1, shuffle=False, num_workers=0, drop_last=False)
    print(f'    Train pairs: {len(train_dataset)}   Model parameters: {p_number}   Epochs: {OPT["EPOCHS"]}')

    best_psnr, best_ssim = 0, 0
    best_epoch_psnr, best_epoch_ssim = 0, 0
    step = 0
    for epoch in range(1, OPT['EPOCHS'] + 1):
        epoch_start_time = time.time()
        epoch_loss = 0
        model_restored.train()
        for i, data in enumerate(train_loader, 0):
            for param in model_restored.parameters():
                param.grad = None
            target = data[0]
            input_ = data[1]
            restored = model_restored(input_)
            loss = L1_loss(restored, target)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            step += 1
            if step % 10 == 0:
                print(f'  step {step}: L1 {loss.item():.4f}')

        if epoch % Train['VAL_AFTER_EVERY'] == 0:
            model_restored.eval()
            psnr_val_rgb = []
            ssim_val_rgb = []
            for ii, data_val in enumerate(val_loader, 0):
                target = data_val[0]
                input_ = data_val[1]
                with torch.no_grad():
                    restored = model_restored(input_)
                for res, tar in zip(restored, target):
                    psnr_val_rgb.append(torchPSNR(res, tar))
                    ssim_val_rgb.append(torchSSIM(restored, target))

            psnr_val_rgb = torch.stack(psnr_val_rgb).mean().item()
            ssim_val_rgb = torch.stack(ssim_val_rgb).mean().item()

            if psnr_val_rgb > best_psnr:
                best_psnr, best_epoch_psnr = psnr_val_rgb, epoch
                torch.save({'epoch': epoch, 'state_dict': model_restored.state_dict(),
                            'optimizer': optimizer.state_dict()}, os.path.join(model_dir, 'model_bestPSNR.pth'))
            print('[epoch %d PSNR: %.4f --- best_epoch %d Best_PSNR %.4f]' % (
                epoch, psnr_val_rgb, best_epoch_psnr, best_psnr))
            if ssim_val_rgb > best_ssim:
                best_ssim, best_epoch_ssim = ssim_val_rgb, epoch
            print('[epoch %d SSIM: %.4f --- best_epoch %d Best_SSIM %.4f]' % (
                epoch, ssim_val_rgb, best_epoch_ssim, best_ssim))
        scheduler.step()

        print('Epoch: {}\tTime: {:.4f}\tLoss: {:.4f}\tLearningRate {:.6f}'.format(
            epoch, time.time() - epoch_start_time, epoch_loss, scheduler.get_last_lr()[0]))
        torch.save({'epoch': epoch, 'state_dict': model_restored.state_dict(),
                    'optimizer': optimizer.state_dict()}, os.path.join(model_dir, 'model_latest.pth'))


if __name__ == '__main__':
    main()
