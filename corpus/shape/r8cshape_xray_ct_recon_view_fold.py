"""Single-view X-ray to CT reconstruction with a ReconNet-style 2D encoder / 3D decoder.

Each training pair is a synthetic CT volume (a few ellipsoidal "organs" in a 16 x 32 x 32 grid)
and its DRR, the digitally reconstructed radiograph obtained by integrating the volume along the
beam axis and rendering it on the detector. The representation network encodes the radiograph,
the transform module turns the 2D code into a small 3D feature volume, and the generation
network decodes the CT slices.
"""
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
np.random.seed(0)

CT_DEPTH, CT_SIZE = 16, 32
DETECTOR_SIZE = 64


def render_drr(volume, detector_size):
    """Line integrals along the beam (the depth axis), resampled to the detector grid."""
    projection = volume.sum(axis=0, keepdims=True) / volume.shape[0]
    projection = torch.from_numpy(projection).unsqueeze(0)
    projection = F.interpolate(projection, size=(detector_size, detector_size), mode="bilinear",
                               align_corners=False)
    return projection[0]


class MedReconDataset(Dataset):
    """3D Reconstruction Dataset."""

    def __init__(self, n_cases, seed):
        rng = np.random.RandomState(seed)
        z, y, x = np.meshgrid(np.linspace(-1, 1, CT_DEPTH), np.linspace(-1, 1, CT_SIZE),
                              np.linspace(-1, 1, CT_SIZE), indexing="ij")
        self.drr_list, self.ct_list = [], []
        for _ in range(n_cases):
            ct = np.zeros((CT_DEPTH, CT_SIZE, CT_SIZE), dtype=np.float32)
            for _ in range(rng.randint(2, 5)):
                c = rng.uniform(-0.5, 0.5, size=3)
                r = rng.uniform(0.2, 0.5, size=3)
                inside = (((z - c[0]) / r[0]) ** 2 + ((y - c[1]) / r[1]) ** 2
                          + ((x - c[2]) / r[2]) ** 2) < 1.0
                ct[inside] = rng.uniform(0.5, 1.0)
            self.ct_list.append(torch.from_numpy(ct))
            self.drr_list.append(render_drr(ct, DETECTOR_SIZE))

    def __len__(self):
        return len(self.ct_list)

    def __getitem__(self, idx):
        return {"drr": self.drr_list[idx], "ct": self.ct_list[idx]}


def _make_layers(in_channels, out_channels, type, batch_norm=False, activation=None):
    if type == "conv4_s2":
        layers = [nn.Conv2d(in_channels, out_channels, 4, 2, 1, bias=False)]
    elif type == "conv3_s1":
        layers = [nn.Conv2d(in_channels, out_channels, 3, 1, 1, bias=False)]
    elif type == "conv1_s1":
        layers = [nn.Conv2d(in_channels, out_channels, 1, 1, 0, bias=False)]
    elif type == "deconv1x1_s1":
        layers = [nn.ConvTranspose3d(in_channels, out_channels, 1, 1, 0, bias=False)]
    elif type == "deconv3x3_s1":
        layers = [nn.ConvTranspose3d(in_channels, out_channels, 3, 1, 1, bias=False)]
    elif type == "deconv4x4_s2":
        layers = [nn.ConvTranspose3d(in_channels, out_channels, 4, 2, 1, bias=False)]
    elif type == "conv1x1_s1":
        layers = [nn.Conv3d(in_channels, out_channels, 1, 1, 0, bias=False)]
    else:
        raise NotImplementedError("layer type [{}] is not implemented".format(type))
    if batch_norm == "2d":
        layers.append(nn.BatchNorm2d(out_channels))
    elif batch_norm == "3d":
        layers.append(nn.BatchNorm3d(out_channels))
    if activation == "relu":
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class ReconNet(nn.Module):
    def __init__(self, in_planes, out_planes):
        super().__init__()
        # representation network
        self.conv_layer1 = _make_layers(in_planes, 16, "conv4_s2", False)
        self.conv_layer2 = _make_layers(16, 16, "conv3_s1", "2d")
        self.relu2 = nn.ReLU(inplace=True)
        self.conv_layer3 = _make_layers(16, 32, "conv4_s2", "2d", "relu")
        self.conv_layer4 = _make_layers(32, 32, "conv3_s1", "2d")
        self.relu4 = nn.ReLU(inplace=True)
        self.conv_layer5 = _make_layers(32, 64, "conv4_s2", "2d", "relu")
        self.conv_layer6 = _make_layers(64, 64, "conv3_s1", "2d")
        self.relu6 = nn.ReLU(inplace=True)
        # transform module
        self.trans_layer1 = _make_layers(64, 64, "conv1_s1", False, "relu")
        self.trans_layer2 = _make_layers(32, 32, "deconv1x1_s1", False, "relu")
        # generation network
        self.deconv_layer6 = _make_layers(32, 16, "deconv4x4_s2", "3d", "relu")
        self.deconv_layer5 = _make_layers(16, 16, "deconv3x3_s1", "3d", "relu")
        self.deconv_layer4 = _make_layers(16, 8, "deconv4x4_s2", "3d", "relu")
        self.deconv_layer3 = _make_layers(8, 8, "deconv3x3_s1", "3d", "relu")
        self.deconv_layer2 = _make_layers(8, 8, "deconv4x4_s2", "3d", "relu")
        self.deconv_layer0 = _make_layers(8, 1, "conv1x1_s1", False, "relu")
        self.output_layer = _make_layers(CT_DEPTH, out_planes, "conv1_s1", False)

    def forward(self, x):
        conv1 = self.conv_layer1(x)
        conv2 = self.conv_layer2(conv1)
        relu2 = self.relu2(conv1 + conv2)
        conv3 = self.conv_layer3(relu2)
        conv4 = self.conv_layer4(conv3)
        relu4 = self.relu4(conv3 + conv4)
        conv5 = self.conv_layer5(relu4)
        conv6 = self.conv_layer6(conv5)
        relu6 = self.relu6(conv5 + conv6)

        features = self.trans_layer1(relu6)
        trans_features = features.view(-1, 32, 2, 4, 4)
        trans_features = self.trans_layer2(trans_features)

        deconv6 = self.deconv_layer6(trans_features)
        deconv5 = self.deconv_layer5(deconv6)
        deconv4 = self.deconv_layer4(deconv5)
        deconv3 = self.deconv_layer3(deconv4)
        deconv2 = self.deconv_layer2(deconv3)
        out = self.deconv_layer0(deconv2)
        out = torch.squeeze(out, 1)
        out = self.output_layer(out)
        return out


def main():
    train_dataset = MedReconDataset(60, seed=1)
    test_dataset = MedReconDataset(16, seed=2)
    train_dl = DataLoader(train_dataset, 1, shuffle=True, num_workers=0)
    test_dl = DataLoader(test_dataset, 1, shuffle=False, num_workers=0)

    model = ReconNet(in_planes=1, out_planes=CT_DEPTH)
    criterion = nn.MSELoss(reduction="mean")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

    start = time.time()
    for epoch in range(2):
        model.train()
        running_loss = 0.0
        for step, sample in enumerate(train_dl):
            drr = sample["drr"]
            ct = sample["ct"]

            optimizer.zero_grad()
            outputs = model(drr)
            loss = criterion(outputs, ct)
            loss.backward()
            optimizer.step()

            running_loss += loss.item()
            if step % 10 == 9:
                print("[%d, %5d] loss: %.4f" % (epoch + 1, step + 1, running_loss / 10))
                running_loss = 0.0

        model.eval()
        with torch.no_grad():
            mae = 0.0
            for sample in test_dl:
                outputs = model(sample["drr"])
                mae += (outputs - sample["ct"]).abs().mean().item()
        print("epoch %d  test MAE %.4f  (%.1fs)" % (epoch + 1, mae / len(test_dl), time.time() - start))
    print("Finished Training")


if __name__ == "__main__":
    main()
