"""Deep Image Prior denoising, in the style of DmitryUlyanov/deep-image-prior denoising.py /
denoising.ipynb: an untrained encoder-decoder with skip connections maps a fixed random code to the
noisy image; the network's structure fits the image before the noise, so the output (and its running
average) is a denoised version of the input.

Synthetic 64x64 grey image (shapes + smooth shading), Gaussian noise sigma = 25/255.
"""
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)

dtype = torch.FloatTensor

sigma = 25
sigma_ = sigma / 255.

INPUT = 'noise'
pad = 'reflection'
OPT_OVER = 'net'

reg_noise_std = 1. / 30.
LR = 0.01

OPTIMIZER = 'adam'
show_every = 100
exp_weight = 0.99

num_iter = 400
input_depth = 16


def compare_psnr(im_true, im_test):
    mse = np.mean((im_true.astype(np.float64) - im_test.astype(np.float64)) ** 2)
    return 10 * np.log10(1.0 / mse)


def make_clean_image(size=64):
    ys, xs = np.mgrid[0:size, 0:size] / (size - 1.0)
    img = 0.2 + 0.3 * xs
    img[(xs - 0.35) ** 2 + (ys - 0.4) ** 2 < 0.05] = 0.85
    img[(np.abs(xs - 0.72) < 0.12) & (np.abs(ys - 0.7) < 0.2)] = 0.1
    img[(ys > 0.82) & (xs < 0.5)] = 0.6
    img += 0.05 * np.sin(12 * ys)
    return np.clip(img, 0, 1)[None].astype(np.float32)


def get_noisy_image(img_np, sigma):
    img_noisy_np = np.clip(img_np + np.random.normal(scale=sigma, size=img_np.shape), 0, 1).astype(np.float32)
    return img_noisy_np


def np_to_torch(img_np):
    return torch.from_numpy(img_np)[None, :]


def get_noise(input_depth, method, spatial_size, noise_type='u', var=1. / 10):
    shape = [1, input_depth, spatial_size[0], spatial_size[1]]
    net_input = torch.zeros(shape)
    if noise_type == 'u':
        net_input.uniform_()
    else:
        net_input.normal_()
    net_input *= var
    return net_input


def conv(in_f, out_f, kernel_size, stride=1, pad='zero'):
    padder = None
    to_pad = int((kernel_size - 1) / 2)
    if pad == 'reflection':
        padder = nn.ReflectionPad2d(to_pad)
        to_pad = 0
    convolver = nn.Conv2d(in_f, out_f, kernel_size, stride, padding=to_pad, bias=True)
    layers = [x for x in [padder, convolver] if x is not None]
    return nn.Sequential(*layers)


def bn(num_features):
    return nn.BatchNorm2d(num_features)


def act():
    return nn.LeakyReLU(0.2, inplace=True)


class Concat(nn.Module):
    def __init__(self, dim, *args):
        super(Concat, self).__init__()
        self.dim = dim
        for idx, module in enumerate(args):
            self.add_module(str(idx), module)

    def forward(self, input):
        inputs = [module(input) for module in self._modules.values()]
        return torch.cat(inputs, dim=self.dim)


def skip(num_input_channels=2, num_output_channels=3,
         num_channels_down=[16, 32, 64], num_channels_up=[16, 32, 64], num_channels_skip=[4, 4, 4],
         filter_size_down=3, filter_size_up=3, upsample_mode='bilinear', pad='reflection'):
    n_scales = len(num_channels_down)
    model = nn.Sequential()
    model_tmp = model
    input_depth = num_input_channels
    for i in range(n_scales):
        deeper = nn.Sequential()
        skip = nn.Sequential()
        if num_channels_skip[i] != 0:
            model_tmp.add_module('concat', Concat(1, skip, deeper))
        else:
            model_tmp.add_module('deeper', deeper)
        model_tmp.add_module('bn', bn(num_channels_skip[i] + (num_channels_up[i + 1] if i < n_scales - 1 else num_channels_down[i])))

        if num_channels_skip[i] != 0:
            skip.add_module('conv', conv(input_depth, num_channels_skip[i], 1, pad=pad))
            skip.add_module('bn', bn(num_channels_skip[i]))
            skip.add_module('act', act())

        deeper.add_module('conv1', conv(input_depth, num_channels_down[i], filter_size_down, 2, pad=pad))
        deeper.add_module('bn1', bn(num_channels_down[i]))
        deeper.add_module('act1', act())
        deeper.add_module('conv2', conv(num_channels_down[i], num_channels_down[i], filter_size_down, pad=pad))
        deeper.add_module('bn2', bn(num_channels_down[i]))
        deeper.add_module('act2', act())

        deeper_main = nn.Sequential()
        if i == n_scales - 1:
            k = num_channels_down[i]
        else:
            deeper.add_module('deeper_main', deeper_main)
            k = num_channels_up[i + 1]
        deeper.add_module('up', nn.Upsample(scale_factor=2, mode=upsample_mode, align_corners=False))

        model_tmp.add_module('conv_up', conv(num_channels_skip[i] + k, num_channels_up[i], filter_size_up, 1, pad=pad))
        model_tmp.add_module('bn_up', bn(num_channels_up[i]))
        model_tmp.add_module('act_up', act())
        model_tmp.add_module('conv_1x1', conv(num_channels_up[i], num_channels_up[i], 1, pad=pad))
        model_tmp.add_module('bn_1x1', bn(num_channels_up[i]))
        model_tmp.add_module('act_1x1', act())

        input_depth = num_channels_down[i]
        model_tmp = deeper_main

    model.add_module('conv_out', conv(num_channels_up[0], num_output_channels, 1, pad=pad))
    model.add_module('sigmoid', nn.Sigmoid())
    return model


img_np = make_clean_image(64)
img_noisy_np = get_noisy_image(img_np, sigma_)
print('PSNR of the noisy image: %.2f dB' % compare_psnr(img_np, img_noisy_np))

net = skip(input_depth, 1,
           num_channels_down=[16, 16, 16],
           num_channels_up=[16, 16, 16],
           num_channels_skip=[4, 4, 4],
           upsample_mode='bilinear', pad=pad).type(dtype)

net_input = get_noise(input_depth, INPUT, (img_np.shape[1], img_np.shape[2])).type(dtype).detach()

s = sum([np.prod(list(p.size())) for p in net.parameters()])
print('Number of params: %d' % s)

mse = torch.nn.MSELoss().type(dtype)

img_noisy_torch = np_to_torch(img_noisy_np).type(dtype)

net_input_saved = net_input.detach().clone()
noise = net_input.detach().clone()
out_avg = None
last_net = None
psrn_noisy_last = 0

i = 0


def closure():

    global i, out_avg, psrn_noisy_last, last_net, net_input

    if reg_noise_std > 0:
        net_input = net_input_saved + (noise.normal_() * reg_noise_std)

    out = net(net_input)

    # Smoothing
    if out_avg is None:
        out_avg = out.detach()
    else:
        out_avg = out_avg * exp_weight + out.detach() * (1 - exp_weight)

    total_loss = mse(out, img_noisy_torch)
    total_loss.backward()

    psrn_noisy = compare_psnr(img_noisy_np, out.detach().cpu().numpy()[0])
    psrn_gt = compare_psnr(img_np, out.detach().cpu().numpy()[0])
    psrn_gt_sm = compare_psnr(img_np, out_avg.detach().cpu().numpy()[0])

    if i % show_every == 0 or i == num_iter - 1:
        print('Iteration %05d    Loss %f   PSNR_noisy: %f   PSRN_gt: %f PSNR_gt_sm: %f' % (
            i, total_loss.item(), psrn_noisy, psrn_gt, psrn_gt_sm))

    # Backtracking
    if i % show_every:
        if psrn_noisy - psrn_noisy_last < -5:
            print('Falling back to previous checkpoint.')

            for new_param, net_param in zip(last_net, net.parameters()):
                net_param.data.copy_(new_param)

            return total_loss * 0
        else:
            last_net = [x.detach().cpu() for x in net.parameters()]
            psrn_noisy_last = psrn_noisy

    i += 1

    return total_loss


def get_params(opt_over, net, net_input):
    opt_over_list = opt_over.split(',')
    params = []
    for opt in opt_over_list:
        if opt == 'net':
            params += [x for x in net.parameters()]
        elif opt == 'input':
            net_input.requires_grad = True
            params += [net_input]
    return params


def optimize(optimizer_type, parameters, closure, LR, num_iter):
    if optimizer_type == 'adam':
        print('Starting optimization with ADAM')
        optimizer = torch.optim.Adam(parameters, lr=LR)

        for j in range(num_iter):
            optimizer.zero_grad()
            closure()
            optimizer.step()


p = get_params(OPT_OVER, net, net_input)
optimize(OPTIMIZER, p, closure, LR, num_iter)

out_np = net(net_input_saved).detach().numpy()[0]
print('final PSNR (no input noise) %.2f dB, smoothed output %.2f dB, noisy input %.2f dB' % (
    compare_psnr(img_np, out_np), compare_psnr(img_np, out_avg.numpy()[0]), compare_psnr(img_np, img_noisy_np)))
