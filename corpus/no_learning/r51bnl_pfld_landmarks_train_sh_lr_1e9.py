"""PFLD-style facial landmark training: a small MobileNet-like backbone regresses 10 landmarks,
an auxiliary net predicts the head pose (euler angles) that weights the L2 loss."""
import argparse
import math
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--learning_rate', type=float, default=0.000000001)
    parser.add_argument('--batch_size', type=int, default=32)
    parser.add_argument('--max_epoch', type=int, default=6)
    parser.add_argument('--image_size', type=int, default=32)
    parser.add_argument('--weight_decay', type=float, default=1e-6)
    parser.add_argument('--level', type=str, default='L1')
    return parser.parse_args()


MEAN_SHAPE = np.array([[-0.25, -0.15], [-0.1, -0.15], [0.1, -0.15], [0.25, -0.15], [0.0, 0.0],
                       [-0.12, 0.12], [0.12, 0.12], [-0.18, 0.25], [0.0, 0.3], [0.18, 0.25]], dtype=np.float32)


class WFLWSynth(Dataset):
    def __init__(self, n, image_size, seed):
        rng = np.random.RandomState(seed)
        self.images, self.landmarks, self.angles = [], [], []
        yy, xx = np.mgrid[0:image_size, 0:image_size].astype(np.float32) / image_size
        for _ in range(n):
            roll = rng.uniform(-0.5, 0.5)
            yaw, pitch = rng.uniform(-0.3, 0.3, size=2)
            scale = rng.uniform(0.8, 1.2)
            rot = np.array([[math.cos(roll), -math.sin(roll)], [math.sin(roll), math.cos(roll)]], dtype=np.float32)
            pts = MEAN_SHAPE * scale @ rot.T
            pts[:, 0] *= 1.0 - 0.4 * abs(yaw)
            pts = pts + np.array([0.5 + 0.2 * yaw, 0.5 + 0.2 * pitch], dtype=np.float32)
            pts += rng.normal(0, 0.01, pts.shape).astype(np.float32)
            img = np.zeros((image_size, image_size), dtype=np.float32)
            for x, y in pts:
                img += np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * 0.03 ** 2))
            img += rng.normal(0, 0.05, img.shape).astype(np.float32)
            self.images.append(img[None])
            self.landmarks.append(pts.reshape(-1))
            self.angles.append(np.array([pitch, yaw, roll], dtype=np.float32))

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        attribute = np.ones(1, dtype=np.float32)
        return (torch.from_numpy(self.images[i]), torch.from_numpy(self.landmarks[i]),
                torch.from_numpy(attribute), torch.from_numpy(self.angles[i]))


def conv_bn(inp, out, stride):
    return nn.Sequential(nn.Conv2d(inp, out, 3, stride, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True))


def dw_block(inp, out, stride):
    return nn.Sequential(nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                         nn.ReLU(inplace=True), nn.Conv2d(inp, out, 1, bias=False), nn.BatchNorm2d(out),
                         nn.ReLU(inplace=True))


class PFLDInference(nn.Module):
    def __init__(self, n_landmarks=10):
        super().__init__()
        self.conv1 = conv_bn(1, 16, 1)
        self.block1 = dw_block(16, 32, 2)
        self.block2 = dw_block(32, 48, 2)
        self.block3 = dw_block(48, 64, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64 + 48, n_landmarks * 2)

    def forward(self, x):
        x = self.conv1(x)
        x = self.block1(x)
        features = self.block2(x)
        x = self.block3(features)
        multi_scale = torch.cat([self.pool(features).flatten(1), self.pool(x).flatten(1)], 1)
        return features, self.fc(multi_scale)


class AuxiliaryNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(conv_bn(48, 32, 2), conv_bn(32, 32, 1))
        self.fc = nn.Sequential(nn.Linear(32, 32), nn.ReLU(inplace=True), nn.Linear(32, 3))

    def forward(self, x):
        x = self.conv(x)
        return self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


class PFLDLoss(nn.Module):
    def forward(self, attribute_gt, landmark_gt, euler_angle_gt, angle, landmarks):
        weight_angle = torch.sum(1 - torch.cos(angle - euler_angle_gt), dim=1)
        weight_attribute = attribute_gt.sum(1)
        l2_distant = torch.sum((landmark_gt - landmarks) ** 2, dim=1)
        return torch.mean(weight_angle * weight_attribute * l2_distant), torch.mean(l2_distant)


def nme(landmarks, landmark_gt):
    pred = landmarks.view(-1, 10, 2)
    gt = landmark_gt.view(-1, 10, 2)
    interocular = torch.norm(gt[:, 0] - gt[:, 3], dim=1)
    return (torch.norm(pred - gt, dim=2).mean(1) / interocular).mean().item()


def validate(loader, pfld_backbone):
    pfld_backbone.eval()
    errors = []
    with torch.no_grad():
        for img, landmark_gt, _, _ in loader:
            _, landmarks = pfld_backbone(img)
            errors.append(nme(landmarks, landmark_gt))
    pfld_backbone.train()
    return float(np.mean(errors))


def main():
    args = parse_args()
    torch.manual_seed(0)
    train_set = WFLWSynth(768, args.image_size, seed=1)
    val_set = WFLWSynth(256, args.image_size, seed=2)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=128)

    pfld_backbone = PFLDInference()
    auxiliarynet = AuxiliaryNet()
    criterion = PFLDLoss()
    optimizer = torch.optim.Adam([{'params': pfld_backbone.parameters()},
                                  {'params': auxiliarynet.parameters()}],
                                 lr=args.learning_rate, weight_decay=args.weight_decay)
    print(f"train {len(train_set)} val {len(val_set)} lr {args.learning_rate}")
    print(f"epoch 0 val NME {validate(val_loader, pfld_backbone):.4f}")
    step = 0
    for epoch in range(1, args.max_epoch + 1):
        weighted_losses, l2_losses = [], []
        for img, landmark_gt, attribute_gt, euler_angle_gt in train_loader:
            features, landmarks = pfld_backbone(img)
            angle = auxiliarynet(features)
            weighted_loss, loss = criterion(attribute_gt, landmark_gt, euler_angle_gt, angle, landmarks)
            optimizer.zero_grad()
            weighted_loss.backward()
            optimizer.step()
            step += 1
            weighted_losses.append(weighted_loss.item()); l2_losses.append(loss.item())
        print(f"epoch {epoch} step {step} weighted_loss {np.mean(weighted_losses):.5f} "
              f"l2_loss {np.mean(l2_losses):.5f} val NME {validate(val_loader, pfld_backbone):.4f}")


if __name__ == '__main__':
    main()
