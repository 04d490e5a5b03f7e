"""Neural style transfer (Gatys et al.) in the style of neural-style-pt.

Content and style targets are captured from a VGG-style feature network, the output image is
optimised with L-BFGS to match the content features (relu4_2) and the Gram matrices of the
style layers (relu1_1 ... relu4_1). Images are preprocessed caffe-style (BGR, 0-255, mean
subtracted). The network and the images are converted to half precision (HalfTensor) to fit
larger images in memory.

Feature network: a compact VGG-19 layout with fixed random weights (random conv features
already carry texture statistics); content and style images are synthetic.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("-image_size", help="Maximum height / width of generated image", type=int, default=64)
parser.add_argument("-content_weight", type=float, default=5e0)
parser.add_argument("-style_weight", type=float, default=1e2)
parser.add_argument("-tv_weight", type=float, default=1e-3)
parser.add_argument("-num_iterations", type=int, default=40)
parser.add_argument("-init", choices=['random', 'image'], default='random')
parser.add_argument("-print_iter", type=int, default=10)
parser.add_argument("-seed", type=int, default=123)
parser.add_argument("-content_layers", help="layers for content", default='relu4_2')
parser.add_argument("-style_layers", help="layers for style", default='relu1_1,relu2_1,relu3_1,relu4_1')
params = parser.parse_args()


def setup_dtype():
    return torch.float16


def build_vgg():
    cfg = [('conv1_1', 3, 16), ('conv1_2', 16, 16), 'pool1',
           ('conv2_1', 16, 32), ('conv2_2', 32, 32), 'pool2',
           ('conv3_1', 32, 64), ('conv3_2', 64, 64), 'pool3',
           ('conv4_1', 64, 128), ('conv4_2', 128, 128)]
    layers, names = [], []
    for item in cfg:
        if isinstance(item, str):
            layers.append(nn.MaxPool2d(2, 2))
            names.append(item)
        else:
            name, cin, cout = item
            layers.append(nn.Conv2d(cin, cout, 3, padding=1))
            names.append(name)
            layers.append(nn.ReLU(inplace=True))
            names.append(name.replace('conv', 'relu'))
    return nn.Sequential(*layers), names


def make_images(size):
    ys, xs = torch.meshgrid(torch.linspace(0, 1, size), torch.linspace(0, 1, size), indexing='ij')
    content = torch.stack([0.5 + 0.4 * (xs > 0.5).float() * (ys > 0.3).float(),
                           0.3 + 0.5 * ((xs - 0.4) ** 2 + (ys - 0.5) ** 2 < 0.05).float(),
                           0.4 + 0.3 * ys])
    style = torch.stack([0.5 + 0.5 * torch.sin(25 * xs + 9 * ys),
                         0.5 + 0.5 * torch.sin(17 * ys - 5 * xs),
                         0.5 + 0.5 * torch.cos(31 * (xs + ys))])
    return content.unsqueeze(0), style.unsqueeze(0)


def preprocess(image):
    # RGB [0,1] -> BGR [0,255] with the caffe mean subtracted
    image = image[:, [2, 1, 0]] * 255
    mean = torch.tensor([103.939, 116.779, 123.68]).view(1, 3, 1, 1)
    return image - mean


def deprocess(output_tensor):
    mean = torch.tensor([103.939, 116.779, 123.68]).view(1, 3, 1, 1)
    output_tensor = (output_tensor.float() + mean) / 255
    return output_tensor[:, [2, 1, 0]].clamp(0, 1)


class ContentLoss(nn.Module):
    def __init__(self, strength):
        super().__init__()
        self.strength = strength
        self.crit = nn.MSELoss()
        self.mode = 'None'

    def forward(self, input):
        if self.mode == 'loss':
            self.loss = self.crit(input, self.target) * self.strength
        elif self.mode == 'capture':
            self.target = input.detach()
        return input


class GramMatrix(nn.Module):
    def forward(self, input):
        B, C, H, W = input.size()
        x_flat = input.view(C, H * W)
        return torch.mm(x_flat, x_flat.t())


class StyleLoss(nn.Module):
    def __init__(self, strength):
        super().__init__()
        self.target = torch.Tensor()
        self.strength = strength
        self.gram = GramMatrix()
        self.crit = nn.MSELoss()
        self.mode = 'None'

    def forward(self, input):
        self.G = self.gram(input)
        self.G = self.G.div(input.nelement())
        if self.mode == 'capture':
            self.target = self.G.detach()
        elif self.mode == 'loss':
            self.loss = self.strength * self.crit(self.G, self.target)
        return input


class TVLoss(nn.Module):
    def __init__(self, strength):
        super().__init__()
        self.strength = strength

    def forward(self, input):
        self.x_diff = input[:, :, 1:, :] - input[:, :, :-1, :]
        self.y_diff = input[:, :, :, 1:] - input[:, :, :, :-1]
        self.loss = self.strength * (torch.sum(torch.abs(self.x_diff)) + torch.sum(torch.abs(self.y_diff)))
        return input


def main():
    dtype = setup_dtype()
    torch.manual_seed(params.seed)

    cnn, layer_names = build_vgg()
    cnn = cnn.to(dtype)
    for p in cnn.parameters():
        p.requires_grad = False

    content_img, style_img = make_images(params.image_size)
    content_image = preprocess(content_img).to(dtype)
    style_image = preprocess(style_img).to(dtype)

    content_layers = params.content_layers.split(',')
    style_layers = params.style_layers.split(',')

    # Set up the network, inserting style and content loss modules
    content_losses, style_losses, tv_losses = [], [], []
    next_content_idx, next_style_idx = 1, 1
    net = nn.Sequential()
    if params.tv_weight > 0:
        tv_mod = TVLoss(params.tv_weight).to(dtype)
        net.add_module(str(len(net)), tv_mod)
        tv_losses.append(tv_mod)
    for layer, name in zip(cnn, layer_names):
        if next_content_idx <= len(content_layers) or next_style_idx <= len(style_layers):
            net.add_module(str(len(net)), layer)
            if name in content_layers:
                print("Setting up content layer " + str(len(net)) + ": " + name)
                loss_module = ContentLoss(params.content_weight)
                net.add_module(str(len(net)), loss_module)
                content_losses.append(loss_module)
                next_content_idx += 1
            if name in style_layers:
                print("Setting up style layer " + str(len(net)) + ": " + name)
                loss_module = StyleLoss(params.style_weight)
                net.add_module(str(len(net)), loss_module)
                style_losses.append(loss_module)
                next_style_idx += 1

    # Capture content targets
    for i in content_losses:
        i.mode = 'capture'
    print("Capturing content targets")
    net(content_image)

    # Capture style targets
    for i in content_losses:
        i.mode = 'None'
    for i in style_losses:
        i.mode = 'capture'
    print("Capturing style target 1")
    net(style_image)

    for i in content_losses:
        i.mode = 'loss'
    for i in style_losses:
        i.mode = 'loss'

    # Initialize the image
    if params.init == 'random':
        B, C, H, W = content_image.size()
        img = torch.randn(C, H, W).mul(0.001).unsqueeze(0).to(dtype)
    else:
        img = content_image.clone()
    img = nn.Parameter(img)

    def maybe_print(num_calls, loss):
        if params.print_iter > 0 and num_calls % params.print_iter == 0:
            print("Iteration " + str(num_calls) + " / " + str(params.num_iterations))
            for i, loss_module in enumerate(content_losses):
                print("  Content " + str(i + 1) + " loss: " + str(loss_module.loss.item()))
            for i, loss_module in enumerate(style_losses):
                print("  Style " + str(i + 1) + " loss: " + str(loss_module.loss.item()))
            print("  Total loss: " + str(loss.item()))

    optim_state = {'max_iter': params.num_iterations, 'tolerance_change': -1, 'tolerance_grad': -1}
    optimizer = optim.LBFGS([img], **optim_state)
    print("Running optimization with L-BFGS")

    num_calls = [0]

    def feval():
        num_calls[0] += 1
        optimizer.zero_grad()
        net(img)
        loss = 0
        for mod in content_losses:
            loss += mod.loss
        for mod in style_losses:
            loss += mod.loss
        if params.tv_weight > 0:
            for mod in tv_losses:
                loss += mod.loss
        loss.backward()
        maybe_print(num_calls[0], loss)
        return loss

    optimizer.step(feval)

    out = deprocess(img.detach())
    print("Output image: mean %.3f  std %.3f" % (out.mean().item(), out.std().item()))


if __name__ == "__main__":
    main()
