"""Waypoint predictor (VLN-CE style): frozen RGB / depth encoders embed the 24 views of a
panorama, a small transformer (TRM) predicts a 24 x 12 (angle x distance) waypoint heatmap,
trained with MSE against the ground-truth navigability heatmap."""
import argparse
import math
import random

import torch
import torch.nn as nn
from torch.utils.data import Dataset, DataLoader

device = torch.device("cpu")


def setup():
    torch.manual_seed(0)
    random.seed(0)


class Param:
    def __init__(self):
        self.parser = argparse.ArgumentParser(description="Train waypoint predictor")
        self.parser.add_argument("--ANGLES", type=int, default=24)
        self.parser.add_argument("--NUM_CLASSES", type=int, default=12)
        self.parser.add_argument("--EPOCH", type=int, default=5)
        self.parser.add_argument("--BATCH_SIZE", type=int, default=8)
        self.parser.add_argument("--LEARNING_RATE", type=float, default=1e-3)
        self.parser.add_argument("--TRM_LAYER", default=2, type=int)
        self.parser.add_argument("--HIDDEN_DIM", default=64, type=int)
        self.args = self.parser.parse_args()


class RGBDepthPano(Dataset):
    """Synthetic panoramas: each view has an RGB vector and a depth vector; the free-space
    distance of a view sets where the ground-truth waypoint heatmap peaks."""

    def __init__(self, args, n, seed):
        g = torch.Generator().manual_seed(seed)
        A, C = args.ANGLES, args.NUM_CLASSES
        self.rgb = torch.randn(n, A, 64, generator=g)
        free = torch.rand(n, A, generator=g) * (C - 1)
        depth_dir = torch.randn(32, generator=torch.Generator().manual_seed(7))
        self.depth = torch.randn(n, A, 32, generator=g) * 0.3 + free[..., None] / C * depth_dir
        bins = torch.arange(C).float()
        heat = torch.exp(-(bins - free[..., None]) ** 2 / 2.0)
        self.target = heat
        self.free = free

    def __len__(self):
        return self.rgb.size(0)

    def __getitem__(self, idx):
        return {"sample_id": idx, "rgb": self.rgb[idx], "depth": self.depth[idx],
                "target": self.target[idx], "free": self.free[idx]}


class RGBEncoder(nn.Module):
    def __init__(self, trainable=False):
        super().__init__()
        self.fc = nn.Linear(64, 128)
        for p in self.parameters():
            p.requires_grad = trainable

    def forward(self, x):
        return torch.relu(self.fc(x))


class DepthEncoder(nn.Module):
    def __init__(self, trainable=False):
        super().__init__()
        self.fc = nn.Linear(32, 64)
        for p in self.parameters():
            p.requires_grad = trainable

    def forward(self, x):
        return torch.relu(self.fc(x))


class BinaryDistPredictor_TRM(nn.Module):
    def __init__(self, args, hidden_dim, n_classes):
        super().__init__()
        self.visual_fc = nn.Sequential(nn.Linear(128 + 64, hidden_dim), nn.LayerNorm(hidden_dim))
        self.angle_emb = nn.Parameter(torch.randn(args.ANGLES, hidden_dim) * 0.02)
        layer = nn.TransformerEncoderLayer(hidden_dim, 4, hidden_dim * 2, dropout=0.0,
                                           batch_first=True)
        self.waypoint_TRM = nn.TransformerEncoder(layer, args.TRM_LAYER)
        self.vis_classifier = nn.Sequential(nn.Linear(hidden_dim, hidden_dim // 2), nn.ReLU(),
                                            nn.Linear(hidden_dim // 2, n_classes))

    def forward(self, rgb_feats, depth_feats):
        x = self.visual_fc(torch.cat([rgb_feats, depth_feats], -1)) + self.angle_emb
        x = self.waypoint_TRM(x)
        return self.vis_classifier(x)


def waypoint_eval(predictions, targets, free):
    # distance of the predicted heatmap peak from the free-space distance of each view
    pred_bin = predictions.argmax(-1).float()
    dist_err = (pred_bin - free).abs().mean().item()
    return {"avg_pred_distance_err": dist_err}


def predict_waypoints(args):
    print("\nArguments", args)
    rgb_encoder = RGBEncoder(trainable=False).to(device)
    depth_encoder = DepthEncoder(trainable=False).to(device)
    predictor = BinaryDistPredictor_TRM(args, hidden_dim=args.HIDDEN_DIM,
                                        n_classes=args.NUM_CLASSES).to(device)

    trainloader = DataLoader(RGBDepthPano(args, 320, seed=1), batch_size=args.BATCH_SIZE,
                             shuffle=True)
    evalloader = DataLoader(RGBDepthPano(args, 96, seed=2), batch_size=args.BATCH_SIZE,
                            shuffle=False)

    criterion_mse = nn.MSELoss(reduction="none")
    params = list(predictor.parameters())
    optimizer = torch.optim.AdamW(params, lr=args.LEARNING_RATE)

    print("\nTraining starts")
    for epoch in range(args.EPOCH):
        sum_loss = 0.0
        rgb_encoder.eval()
        depth_encoder.eval()
        predictor.train()
        for i, data in enumerate(trainloader):
            rgb_feats = rgb_encoder(data["rgb"].to(device))
            depth_feats = depth_encoder(data["depth"].to(device))
            target = data["target"].to(device)

            vis_logits = predictor(rgb_feats, depth_feats)
            loss_vis = criterion_mse(vis_logits, target)
            total_loss = loss_vis.sum() / vis_logits.size(0) / args.ANGLES

            total_loss.backward()
            optimizer.step()
            sum_loss += total_loss.item()
            if i % 10 == 0:
                print("Epoch: %d/%d  iter %d  loss %.5f" % (epoch + 1, args.EPOCH, i,
                                                            total_loss.item()))
        print("Train Loss: %.5f" % (sum_loss / (i + 1)))

        sum_loss = 0.0
        predictor.eval()
        preds, targets, frees = [], [], []
        with torch.no_grad():
            for i, data in enumerate(evalloader):
                rgb_feats = rgb_encoder(data["rgb"])
                depth_feats = depth_encoder(data["depth"])
                target = data["target"]
                vis_logits = predictor(rgb_feats, depth_feats)
                total_loss = criterion_mse(vis_logits, target).sum() / vis_logits.size(0) / args.ANGLES
                sum_loss += total_loss.item()
                preds.append(vis_logits)
                targets.append(target)
                frees.append(data["free"])
        print("Eval Loss: %.5f" % (sum_loss / (i + 1)))
        results = waypoint_eval(torch.cat(preds), torch.cat(targets), torch.cat(frees))
        log_string = "Epoch %s " % epoch
        for key, value in results.items():
            log_string += "{} {:.5f} | ".format(key, value)
        print(log_string)


if __name__ == "__main__":
    param = Param()
    args = param.args
    setup()
    predict_waypoints(args)
