"""DANN (fungtion/DANN): unsupervised domain adaptation MNIST -> MNIST-M.

CNNModel with a feature extractor, a label classifier and a domain classifier
behind a gradient reversal layer (a custom autograd Function whose backward
returns -alpha * grad). The model returns (class_output, domain_output); the loss
is err_s_label + err_s_domain + err_t_domain with NLLLoss on LogSoftmax outputs,
Adam lr 1e-3, alpha ramped 2/(1+exp(-10p))-1 over training. The datasets are
synthetic: grey seven-segment digits as the source, the same kind of digits
blended |background - digit| onto colour backgrounds (MNIST-M style) as the
unlabelled target. Ported from
Python 2; the per-epoch checkpoint + reload for testing is a deepcopy here.
"""
import copy
import random

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data
from torch.autograd import Function
from torch.utils.data import Dataset


class ReverseLayerF(Function):

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha

        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        output = grad_output.neg() * ctx.alpha

        return output, None


class CNNModel(nn.Module):

    def __init__(self):
        super(CNNModel, self).__init__()
        self.feature = nn.Sequential()
        self.feature.add_module('f_conv1', nn.Conv2d(3, 16, kernel_size=5))
        self.feature.add_module('f_bn1', nn.BatchNorm2d(16))
        self.feature.add_module('f_pool1', nn.MaxPool2d(2))
        self.feature.add_module('f_relu1', nn.ReLU(True))
        self.feature.add_module('f_conv2', nn.Conv2d(16, 20, kernel_size=5))
        self.feature.add_module('f_bn2', nn.BatchNorm2d(20))
        self.feature.add_module('f_drop1', nn.Dropout2d())
        self.feature.add_module('f_pool2', nn.MaxPool2d(2))
        self.feature.add_module('f_relu2', nn.ReLU(True))

        self.class_classifier = nn.Sequential()
        self.class_classifier.add_module('c_fc1', nn.Linear(20 * 4 * 4, 100))
        self.class_classifier.add_module('c_bn1', nn.BatchNorm1d(100))
        self.class_classifier.add_module('c_relu1', nn.ReLU(True))
        self.class_classifier.add_module('c_drop1', nn.Dropout2d())
        self.class_classifier.add_module('c_fc2', nn.Linear(100, 100))
        self.class_classifier.add_module('c_bn2', nn.BatchNorm1d(100))
        self.class_classifier.add_module('c_relu2', nn.ReLU(True))
        self.class_classifier.add_module('c_fc3', nn.Linear(100, 10))
        self.class_classifier.add_module('c_softmax', nn.LogSoftmax())

        self.domain_classifier = nn.Sequential()
        self.domain_classifier.add_module('d_fc1', nn.Linear(20 * 4 * 4, 100))
        self.domain_classifier.add_module('d_bn1', nn.BatchNorm1d(100))
        self.domain_classifier.add_module('d_relu1', nn.ReLU(True))
        self.domain_classifier.add_module('d_fc2', nn.Linear(100, 2))
        self.domain_classifier.add_module('d_softmax', nn.LogSoftmax(dim=1))

    def forward(self, input_data, alpha):
        input_data = input_data.expand(input_data.data.shape[0], 3, 28, 28)
        feature = self.feature(input_data)
        feature = feature.view(-1, 20 * 4 * 4)
        reverse_feature = ReverseLayerF.apply(feature, alpha)
        class_output = self.class_classifier(feature)
        domain_output = self.domain_classifier(reverse_feature)

        return class_output, domain_output


# ---------------------------------------------------------------- synthetic data
SEGMENTS = {  # a, b, c, d, e, f, g
    0: "abcdef", 1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc",
    5: "afgcd", 6: "afgedc", 7: "abc", 8: "abcdefg", 9: "abcdfg",
}


def render_digit(d, rng):
    img = np.zeros((28, 28), dtype=np.float32)
    h, w = rng.randint(16, 19), rng.randint(10, 13)
    top, left = rng.randint(4, 28 - h - 3), rng.randint(7, 28 - w - 6)
    t = 3
    mid = top + h // 2
    boxes = {
        "a": (top, top + t, left, left + w), "g": (mid - 1, mid - 1 + t, left, left + w),
        "d": (top + h - t, top + h, left, left + w),
        "f": (top, mid, left, left + t), "b": (top, mid, left + w - t, left + w),
        "e": (mid, top + h, left, left + t), "c": (mid, top + h, left + w - t, left + w),
    }
    for s in SEGMENTS[d]:
        y0, y1, x0, x1 = boxes[s]
        img[y0:y1, x0:x1] = 1.0
    img += rng.normal(0, 0.05, img.shape).astype(np.float32)
    return np.clip(img, 0, 1)


def make_domain(n, seed, colour):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 10, n)
    imgs = np.stack([render_digit(int(d), rng) for d in labels])
    if not colour:
        x = torch.from_numpy(imgs)[:, None]
        x = (x - 0.1307) / 0.3081
    else:
        coarse = (rng.rand(n, 3, 4, 4) * 0.5).astype(np.float32)
        bg = torch.nn.functional.interpolate(torch.from_numpy(coarse), size=(28, 28),
                                             mode="bilinear", align_corners=False)
        x = (bg - torch.from_numpy(imgs)[:, None]).abs()
        x = (x - 0.5) / 0.5
    return x, torch.from_numpy(labels).long()


class GetLoader(Dataset):
    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, item):
        return self.images[item], self.labels[item]


source_dataset_name = 'MNIST'
target_dataset_name = 'mnist_m'
lr = 1e-3
batch_size = 32
image_size = 28
n_epoch = 3

manual_seed = 8254
random.seed(manual_seed)
torch.manual_seed(manual_seed)

# load data
datasets = {
    'MNIST': (make_domain(960, 0, colour=False), make_domain(256, 1, colour=False)),
    'mnist_m': (make_domain(960, 2, colour=True), make_domain(256, 3, colour=True)),
}
dataset_source = GetLoader(*datasets[source_dataset_name][0])
dataloader_source = torch.utils.data.DataLoader(
    dataset=dataset_source, batch_size=batch_size, shuffle=True, num_workers=0)
dataset_target = GetLoader(*datasets[target_dataset_name][0])
dataloader_target = torch.utils.data.DataLoader(
    dataset=dataset_target, batch_size=batch_size, shuffle=True, num_workers=0)


def test(net, dataset_name, epoch):
    alpha = 0
    dataloader = torch.utils.data.DataLoader(
        dataset=GetLoader(*datasets[dataset_name][1]), batch_size=128, shuffle=False, num_workers=0)
    my_net = net.eval()
    n_total = 0
    n_correct = 0
    for t_img, t_label in dataloader:
        class_output, _ = my_net(input_data=t_img, alpha=alpha)
        pred = class_output.data.max(1, keepdim=True)[1]
        n_correct += pred.eq(t_label.data.view_as(pred)).cpu().sum()
        n_total += len(t_label)
    accu = n_correct.data.numpy() * 1.0 / n_total
    print('epoch: %d, accuracy of the %s dataset: %f' % (epoch, dataset_name, accu))


# load model
my_net = CNNModel()

# setup optimizer
optimizer = optim.Adam(my_net.parameters(), lr=lr)

loss_class = torch.nn.NLLLoss()
loss_domain = torch.nn.NLLLoss()

for p in my_net.parameters():
    p.requires_grad = True

# training
for epoch in range(n_epoch):

    len_dataloader = min(len(dataloader_source), len(dataloader_target))
    data_source_iter = iter(dataloader_source)
    data_target_iter = iter(dataloader_target)

    i = 0
    while i < len_dataloader:

        p = float(i + epoch * len_dataloader) / n_epoch / len_dataloader
        alpha = 2. / (1. + np.exp(-10 * p)) - 1

        # training model using source data
        data_source = next(data_source_iter)
        s_img, s_label = data_source

        my_net.zero_grad()
        batch_size = len(s_label)

        input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)
        class_label = torch.LongTensor(batch_size)
        domain_label = torch.zeros(batch_size)
        domain_label = domain_label.long()

        input_img.resize_as_(s_img).copy_(s_img)
        class_label.resize_as_(s_label).copy_(s_label)

        class_output, domain_output = my_net(input_data=input_img, alpha=alpha)
        err_s_label = loss_class(class_output, class_label)
        err_s_domain = loss_domain(domain_output, domain_label)

        # training model using target data
        data_target = next(data_target_iter)
        t_img, _ = data_target

        batch_size = len(t_img)

        input_img = torch.FloatTensor(batch_size, 3, image_size, image_size)
        domain_label = torch.ones(batch_size)
        domain_label = domain_label.long()

        input_img.resize_as_(t_img).copy_(t_img)

        _, domain_output = my_net(input_data=input_img, alpha=alpha)
        err_t_domain = loss_domain(domain_output, domain_label)
        err = err_t_domain + err_s_domain + err_s_label
        err.backward()
        optimizer.step()

        i += 1

        print('epoch: %d, [iter: %d / all %d], err_s_label: %f, err_s_domain: %f, err_t_domain: %f'
              % (epoch, i, len_dataloader, err_s_label.cpu().data.numpy(),
                 err_s_domain.cpu().data.numpy(), err_t_domain.cpu().data.numpy()))

    saved = copy.deepcopy(my_net)
    test(saved, source_dataset_name, epoch)
    test(saved, target_dataset_name, epoch)

print('done')
