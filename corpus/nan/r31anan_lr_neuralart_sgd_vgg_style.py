"""A Neural Algorithm of Artistic Style (Gatys et al.), ported from a Torch7 implementation.

The generated image is optimised directly: content loss on conv4_2 activations, style loss on
the (unnormalised) Gram matrices of conv1_1 ... conv5_1, each divided by the squared number of
activations and weighted by style_factor. Images are preprocessed caffe-style (BGR, 0-255,
mean subtracted). Optimizer: L-BFGS or SGD with momentum.

Feature network: a compact VGG-19 layout with fixed random weights; content and style images
are synthetic.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="vgg", choices=["vgg", "inception"])
parser.add_argument("--style_factor", type=float, default=2e9)
parser.add_argument("--num_iters", type=int, default=200)
parser.add_argument("--size", type=int, default=48)
parser.add_argument("--smoothness", type=float, default=0.0)
parser.add_argument("--init", default="image", choices=["image", "random"])
parser.add_argument("--optimizer", default="sgd", choices=["sgd", "lbfgs"])
opt = parser.parse_args()

torch.manual_seed(0)

VGG_CFG = [("conv1_1", 3, 16), ("conv1_2", 16, 16), "pool",
           ("conv2_1", 16, 32), ("conv2_2", 32, 32), "pool",
           ("conv3_1", 32, 64), ("conv3_2", 64, 64), "pool",
           ("conv4_1", 64, 96), ("conv4_2", 96, 96), "pool",
           ("conv5_1", 96, 96)]
STYLE_WEIGHTS = {"conv1_1": 1, "conv2_1": 1, "conv3_1": 1, "conv4_1": 1, "conv5_1": 1}
CONTENT_WEIGHTS = {"conv4_2": 1}
PIXEL_SCALE = 60.0
MEAN_BGR = torch.tensor([103.939, 116.779, 123.68]).view(1, 3, 1, 1)


class VGGFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList()
        self.names = []
        for item in VGG_CFG:
            if item == "pool":
                self.layers.append(nn.AvgPool2d(2, 2))
                self.names.append("pool")
            else:
                name, cin, cout = item
                conv = nn.Conv2d(cin, cout, 3, padding=1)
                std = (2.0 / (9 * cin)) ** 0.5
                nn.init.normal_(conv.weight, 0.0, std / PIXEL_SCALE if cin == 3 else std)
                nn.init.zeros_(conv.bias)
                self.layers.append(conv)
                self.names.append(name)

    def forward(self, x):
        acts = {}
        for name, layer in zip(self.names, self.layers):
            x = layer(x)
            if name != "pool":
                x = F.relu(x)
                acts[name] = x
        return acts


def preprocess(img):
    return img[:, [2, 1, 0]] * 255.0 - MEAN_BGR


def depreprocess(img):
    return ((img + MEAN_BGR) / 255.0)[:, [2, 1, 0]].clamp(0, 1)


def make_images(size):
    ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing="ij")
    content = torch.stack([0.5 + 0.4 * (xs > 0.5).float() * (ys > 0.3).float(),
                           0.3 + 0.5 * ((xs - 0.4) ** 2 + (ys - 0.5) ** 2 < 0.05).float(),
                           0.4 + 0.3 * ys]).unsqueeze(0)
    style = torch.stack([0.5 + 0.5 * torch.sin(20 * xs + 7 * ys),
                         0.5 + 0.5 * torch.sin(13 * ys - 5 * xs),
                         0.5 + 0.5 * torch.cos(9 * (xs + ys))]).unsqueeze(0)
    return content.clamp(0, 1), style.clamp(0, 1)


def gram(x):
    k = x.shape[1]
    flat = x.view(k, -1)
    return flat @ flat.t()


def total_loss(model, input, content_acts, style_grams):
    acts = model(input)
    loss = 0.0
    cw_sum = sum(CONTENT_WEIGHTS.values())
    sw_sum = sum(STYLE_WEIGHTS.values())
    for name, w in CONTENT_WEIGHTS.items():
        loss = loss + (w / cw_sum) * ((acts[name] - content_acts[name]) ** 2).sum() / 2
    for name, w in STYLE_WEIGHTS.items():
        size = acts[name].numel()
        s_loss = ((gram(acts[name]) - style_grams[name]) ** 2).sum() / 2 / (size * size)
        loss = loss + opt.style_factor * (w / sw_sum) * s_loss
    if opt.smoothness > 0:
        tv = ((input[..., 1:, :] - input[..., :-1, :]) ** 2).sum() + ((input[..., :, 1:] - input[..., :, :-1]) ** 2).sum()
        loss = loss + opt.smoothness * tv / 2
    return loss


def main():
    model = VGGFeatures().eval()
    for p in model.parameters():
        p.requires_grad_(False)

    content, style = make_images(opt.size)
    with torch.no_grad():
        content_acts = {k: v.clone() for k, v in model(preprocess(content)).items() if k in CONTENT_WEIGHTS}
        style_grams = {k: gram(v) for k, v in model(preprocess(style)).items() if k in STYLE_WEIGHTS}

    if opt.init == "image":
        input = preprocess(content).clone()
    else:
        input = preprocess((torch.randn_like(content) * 0.1 + 0.5).clamp(0, 1))
    input.requires_grad_(True)

    if opt.optimizer == "sgd":
        learning_rate = 5e-2
        optimizer = torch.optim.SGD([input], lr=learning_rate, momentum=0.9, dampening=0.0)
    else:
        optimizer = torch.optim.LBFGS([input], lr=1, max_iter=3)

    def closure():
        optimizer.zero_grad()
        loss = total_loss(model, input, content_acts, style_grams)
        loss.backward()
        return loss

    for i in range(1, opt.num_iters + 1):
        loss = optimizer.step(closure)
        if opt.optimizer == "sgd" and i % 100 == 0:
            for g in optimizer.param_groups:
                g["lr"] = 0.75 * g["lr"]
        if i % 10 == 0:
            out = depreprocess(input.detach())
            print(f"iter {i:5d}\tloss {loss.item():8.2e}\tlr {optimizer.param_groups[0]['lr']:8.2e}"
                  f"\tmean pixel {out.mean().item():.3f}")

    output = depreprocess(input.detach())
    print(f"final loss {total_loss(model, input.detach(), content_acts, style_grams).item():.4e}  "
          f"output range [{output.min().item():.3f}, {output.max().item():.3f}]")


if __name__ == "__main__":
    main()
