"""ViT fine-tuning recipe of facebookresearch/mae (main_finetune.py + engine_finetune.py):
layer-wise lr decay param groups (util/lr_decay.py), a per-iteration half-cycle cosine schedule
with linear warm-up (util/lr_sched.py), AdamW, label smoothing, global average pooling.
A small ViT on synthetic 16x16 'glyph' images instead of ImageNet."""
import argparse
import math
import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


# ---------------------------------------------------------------- util/lr_decay.py
def param_groups_lrd(model, weight_decay=0.05, no_weight_decay_list=[], layer_decay=.75):
    param_group_names = {}
    param_groups = {}
    num_layers = len(model.blocks) + 1
    layer_scales = list(layer_decay ** (num_layers - i) for i in range(num_layers + 1))

    for n, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim == 1 or n in no_weight_decay_list:
            g_decay = "no_decay"
            this_decay = 0.
        else:
            g_decay = "decay"
            this_decay = weight_decay
        layer_id = get_layer_id_for_vit(n, num_layers)
        group_name = "layer_%d_%s" % (layer_id, g_decay)
        if group_name not in param_group_names:
            this_scale = layer_scales[layer_id]
            param_group_names[group_name] = {"lr_scale": this_scale, "weight_decay": this_decay, "params": []}
            param_groups[group_name] = {"lr_scale": this_scale, "weight_decay": this_decay, "params": []}
        param_group_names[group_name]["params"].append(n)
        param_groups[group_name]["params"].append(p)
    return list(param_groups.values())


def get_layer_id_for_vit(name, num_layers):
    if name in ['cls_token', 'pos_embed']:
        return 0
    elif name.startswith('patch_embed'):
        return 0
    elif name.startswith('blocks'):
        return int(name.split('.')[1]) + 1
    else:
        return num_layers


# ---------------------------------------------------------------- util/lr_sched.py
def adjust_learning_rate(optimizer, epoch, args):
    """Decay the learning rate with half-cycle cosine after warmup"""
    if epoch < args.warmup_epochs:
        lr = args.lr * epoch / args.warmup_epochs
    else:
        lr = args.min_lr + (args.lr - args.min_lr) * 0.5 * \
            (1. + math.cos(math.pi * (epoch - args.warmup_epochs) / (args.epochs - args.warmup_epochs)))
    for param_group in optimizer.param_groups:
        if "lr_scale" in param_group:
            param_group["lr"] = lr * param_group["lr_scale"]
        else:
            param_group["lr"] = lr
    return lr


# ---------------------------------------------------------------- models_vit.py (timm-style)
class PatchEmbed(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=1, embed_dim=64):
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    def __init__(self, dim, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads, mlp_ratio=4.):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, img_size=16, patch_size=4, num_classes=10, embed_dim=64, depth=4, num_heads=4, global_pool=True):
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, 1, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim, num_heads) for _ in range(depth)])
        self.global_pool = global_pool
        if self.global_pool:
            self.fc_norm = nn.LayerNorm(embed_dim, eps=1e-6)
        else:
            self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        nn.init.trunc_normal_(self.pos_embed, std=.02)
        nn.init.trunc_normal_(self.cls_token, std=.02)

    def forward_features(self, x):
        B = x.shape[0]
        x = self.patch_embed(x)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, x), dim=1)
        x = x + self.pos_embed
        for blk in self.blocks:
            x = blk(x)
        if self.global_pool:
            x = x[:, 1:, :].mean(dim=1)
            outcome = self.fc_norm(x)
        else:
            x = self.norm(x)
            outcome = x[:, 0]
        return outcome

    def forward(self, x):
        return self.head(self.forward_features(x))


# ---------------------------------------------------------------- data
class GlyphDataset(Dataset):
    """10 classes of 16x16 stroke glyphs, randomly shifted, with noise."""
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        proto_g = torch.Generator().manual_seed(1234)
        protos = (torch.rand(10, 1, 12, 12, generator=proto_g) < 0.25).float()
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.x = torch.zeros(n, 1, 16, 16)
        shifts = torch.randint(0, 3, (n, 2), generator=g)
        for i in range(n):
            r, c = shifts[i].tolist()
            self.x[i, :, r:r + 12, c:c + 12] = protos[self.y[i]]
        self.x = self.x + 0.25 * torch.randn(self.x.shape, generator=g)
        self.x = (self.x - 0.2) / 0.6

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def train_one_epoch(model, criterion, data_loader, optimizer, epoch, args):
    model.train(True)
    print_freq = 10
    optimizer.zero_grad()
    running = 0.0
    for data_iter_step, (samples, targets) in enumerate(data_loader):
        if data_iter_step % args.accum_iter == 0:
            adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch, args)

        outputs = model(samples)
        loss = criterion(outputs, targets)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)

        loss /= args.accum_iter
        loss.backward()
        if (data_iter_step + 1) % args.accum_iter == 0:
            optimizer.step()
            optimizer.zero_grad()

        min_lr = 10.
        max_lr = 0.
        for group in optimizer.param_groups:
            min_lr = min(min_lr, group["lr"])
            max_lr = max(max_lr, group["lr"])
        running += loss_value
        if data_iter_step % print_freq == 0:
            print('Epoch: [{}]  [{:2d}/{}]  lr: {:.6f} (min {:.6f})  loss: {:.4f}'.format(
                epoch, data_iter_step, len(data_loader), max_lr, min_lr, loss_value))
    print('Epoch: [{}] Averaged stats: loss: {:.4f}'.format(epoch, running / len(data_loader)))


@torch.no_grad()
def evaluate(data_loader, model):
    criterion = torch.nn.CrossEntropyLoss()
    model.eval()
    correct, total, loss_sum = 0, 0, 0.0
    for images, target in data_loader:
        output = model(images)
        loss_sum += criterion(output, target).item() * images.shape[0]
        correct += (output.argmax(1) == target).sum().item()
        total += images.shape[0]
    print('* Acc@1 {:.3f} loss {:.3f}'.format(100.0 * correct / total, loss_sum / total))
    return correct / total


def main():
    parser = argparse.ArgumentParser('MAE fine-tuning for image classification')
    parser.add_argument('--batch_size', default=64, type=int)
    parser.add_argument('--epochs', default=6, type=int)
    parser.add_argument('--accum_iter', default=1, type=int)
    parser.add_argument('--weight_decay', type=float, default=0.05)
    parser.add_argument('--lr', type=float, default=None)
    parser.add_argument('--blr', type=float, default=1e-2)
    parser.add_argument('--layer_decay', type=float, default=0.65)
    parser.add_argument('--min_lr', type=float, default=1e-6)
    parser.add_argument('--warmup_epochs', type=int, default=1)
    parser.add_argument('--smoothing', type=float, default=0.1)
    parser.add_argument('--seed', default=0, type=int)
    args = parser.parse_args()

    torch.manual_seed(args.seed)

    dataset_train = GlyphDataset(1600, seed=1)
    dataset_val = GlyphDataset(500, seed=2)
    data_loader_train = DataLoader(dataset_train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    data_loader_val = DataLoader(dataset_val, batch_size=250, shuffle=False)

    model = VisionTransformer(num_classes=10, global_pool=True)
    nn.init.trunc_normal_(model.head.weight, std=2e-5)

    eff_batch_size = args.batch_size * args.accum_iter
    if args.lr is None:
        args.lr = args.blr * eff_batch_size / 256
    print("base lr: %.2e" % (args.lr * 256 / eff_batch_size))
    print("actual lr: %.2e" % args.lr)

    param_groups = param_groups_lrd(model, args.weight_decay,
                                    no_weight_decay_list={'pos_embed', 'cls_token'},
                                    layer_decay=args.layer_decay)
    optimizer = torch.optim.AdamW(param_groups, lr=args.lr)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.smoothing)
    print("criterion = %s" % str(criterion))

    evaluate(data_loader_val, model)
    max_accuracy = 0.0
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, data_loader_train, optimizer, epoch, args)
        acc = evaluate(data_loader_val, model)
        max_accuracy = max(max_accuracy, acc)
        print(f'Max accuracy: {100 * max_accuracy:.2f}%')


if __name__ == '__main__':
    main()
