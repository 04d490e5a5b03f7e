"""SphereFace (A-Softmax, m=4) face recognition training on a synthetic CASIA-WebFace stand-in.

The network is the SphereFace residual CNN (strided conv + PReLU, residual blocks, no
BatchNorm) followed by the MarginInnerProduct layer with the annealed lambda; training is
SGD with momentum and weight decay, as in the repository's training script.  Faces are
random per-identity templates with per-sample noise and a small shift, fed as HWC uint8
arrays and normalised with (x - 127.5) / 128, like the batch reader does.
"""
import argparse
import datetime
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn import Parameter
from torch.utils.data import DataLoader, Dataset


class MarginInnerProduct(nn.Module):
    def __init__(self, feature_dim, class_num, margin=4, lamb_base=1500, lamb_gamma=0.01, lamb_min=10):
        super().__init__()
        self.in_units = feature_dim
        self.out_units = class_num
        self.lamb_iter = 0
        self.lamb_base = lamb_base
        self.lamb_gamma = lamb_gamma
        self.lamb_min = lamb_min
        self.margin = margin
        self.margin_cos = [
            lambda x: x ** 0,
            lambda x: x ** 1,
            lambda x: 2 * x ** 2 - 1,
            lambda x: 4 * x ** 3 - 3 * x,
            lambda x: 8 * x ** 4 - 8 * x ** 2 + 1,
        ]
        self.weight = Parameter(torch.Tensor(self.out_units, self.in_units))
        self.weight.data.uniform_(-1, 1).renorm_(2, 1, 1e-5).mul_(1e5)

    def forward(self, x, label):
        w_norm = F.normalize(self.weight, dim=1)
        x_norm = x.norm(p=2, dim=1)
        cos_theta = x.mm(w_norm.t())
        cos_theta = cos_theta / x_norm.view(-1, 1)
        cos_theta = cos_theta.clamp(-1, 1)
        cos_m_theta = self.margin_cos[self.margin](cos_theta)
        theta = cos_theta.detach().acos()
        k = (self.margin * theta / math.pi).floor()
        phi_theta = ((-1) ** k) * cos_m_theta - 2 * k
        x_norm_phi_theta = x_norm.view(-1, 1) * phi_theta
        x_norm_cos_theta = x_norm.view(-1, 1) * cos_theta
        index = torch.zeros_like(x_norm_cos_theta, dtype=torch.bool)
        index.scatter_(1, label.view(-1, 1), True)
        lamb = self._get_lambda()
        output = x_norm_cos_theta * 1.0
        output[index] -= x_norm_cos_theta[index] / (1 + lamb)
        output[index] += x_norm_phi_theta[index] / (1 + lamb)
        return output

    def _get_lambda(self):
        self.lamb_iter += 1
        val = self.lamb_base * (1.0 + self.lamb_gamma * self.lamb_iter) ** (-1)
        return max(self.lamb_min, val)


class CNNResidualBlock(nn.Module):
    def __init__(self, in_out_cnn, in_out_res, num_residual):
        super().__init__()
        self.cnn = nn.Conv2d(*in_out_cnn, kernel_size=3, stride=2, padding=1)
        self.relu = nn.PReLU(in_out_cnn[1])
        self.residuals = nn.ModuleList([
            nn.Sequential(
                nn.Conv2d(*in_out_res, kernel_size=3, stride=1, padding=1),
                nn.PReLU(in_out_res[1]),
                nn.Conv2d(*in_out_res, kernel_size=3, stride=1, padding=1),
                nn.PReLU(in_out_res[1]),
            ) for _ in range(num_residual)
        ])

    def forward(self, x):
        x = self.relu(self.cnn(x))
        for m in self.residuals:
            x = x + m(x)
        return x


class SphereFaceNet(nn.Module):
    def __init__(self, class_num, feature_dim=128, image_size=32):
        super().__init__()
        out_size = image_size // 16
        self.main_net = nn.Sequential(
            CNNResidualBlock((3, 16), (16, 16), 1),
            CNNResidualBlock((16, 32), (32, 32), 2),
            CNNResidualBlock((32, 64), (64, 64), 2),
            CNNResidualBlock((64, 128), (128, 128), 1),
            nn.Flatten(),
            nn.Linear(128 * out_size * out_size, feature_dim),
        )
        self.margin_fc = MarginInnerProduct(feature_dim, class_num)
        self.ce_loss = nn.CrossEntropyLoss(reduction="none")

    def forward(self, x, label):
        x = self.main_net(x)
        x = self.margin_fc(x, label)
        return self.ce_loss(x, label)


class SyntheticFaces(Dataset):
    def __init__(self, n, label_num, img_size, seed=0):
        rng = np.random.default_rng(1234)
        self.templates = rng.integers(40, 216, size=(label_num, img_size, img_size, 3)).astype(np.float32)
        g = np.random.default_rng(seed)
        self.labels = g.integers(0, label_num, size=n)
        self.noise_seeds = g.integers(0, 2**31 - 1, size=n)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        g = np.random.default_rng(int(self.noise_seeds[i]))
        img = self.templates[self.labels[i]] + g.normal(0, 20, self.templates.shape[1:])
        img = np.roll(img, int(g.integers(-2, 3)), axis=1)
        return np.clip(img, 0, 255).astype(np.uint8), int(self.labels[i])


def collate_faces(samples):
    datas = np.stack([s[0] for s in samples]).astype(float)
    datas = torch.from_numpy(datas).float().permute(0, 3, 1, 2).contiguous()
    datas -= 127.5
    datas *= 0.0078125
    labels = torch.tensor([s[1] for s in samples], dtype=torch.long)
    return datas, labels


def train(**arg_dict):
    torch.manual_seed(arg_dict["seed"])
    dataset = SyntheticFaces(4096, arg_dict["label_num"], arg_dict["img_size"], seed=arg_dict["seed"])
    loader = DataLoader(dataset, batch_size=arg_dict["batch_size"], shuffle=True, collate_fn=collate_faces)
    net = SphereFaceNet(arg_dict["label_num"], arg_dict["feature_dim"], arg_dict["img_size"])
    optimizer = optim.SGD(net.parameters(), lr=arg_dict["learning_rate"], momentum=0.9, weight_decay=5e-4)
    lr_scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=500000, gamma=0.95)

    print("Start to training...")
    start_time = time.time()
    step = 1
    display = arg_dict["display"]
    loss_list = []
    for epoch in range(arg_dict["max_epoch"]):
        for datas, labels in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(arg_dict["bf16"])):
                loss = net(datas, labels)
            loss = loss.float().mean()
            loss.backward()
            optimizer.step()
            loss_list.append(loss.item())
            if step % display == 0:
                cost_time, start_time = time.time() - start_time, time.time()
                lr = optimizer.param_groups[0]["lr"]
                print("[%s] epochs: %d, step: %d, lr: %.5f, loss: [loss: %.5f], sec/step: %.3f" % (
                    datetime.datetime.now().strftime("%Y%m%d_%H%M%S"), epoch, step, lr,
                    np.mean(loss_list), cost_time / display))
                loss_list = []
            lr_scheduler.step()
            step += 1
            if step > arg_dict["max_steps"]:
                return


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=32, help="Batch size for training")
    parser.add_argument("--max_epoch", type=int, default=100, help="Training will be stoped in this case.")
    parser.add_argument("--max_steps", type=int, default=150)
    parser.add_argument("--img_size", type=int, default=32, help="The size of input for model")
    parser.add_argument("--feature_dim", type=int, default=128, help="dim of face feature")
    parser.add_argument("--label_num", type=int, default=20, help="the label num of your training set")
    parser.add_argument("--learning_rate", type=float, default=0.1, help="lr")
    parser.add_argument("--display", type=int, default=10)
    parser.add_argument("--bf16", type=int, default=1, help="bfloat16 autocast for the forward pass")
    parser.add_argument("--seed", type=int, default=0)
    arg_dict = vars(parser.parse_args())
    train(**arg_dict)


if __name__ == "__main__":
    main()
