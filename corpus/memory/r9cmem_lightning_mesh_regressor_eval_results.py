"""3D body mesh regression from 2D keypoints with PyTorch Lightning.

An MLP lifts 24 detected 2D joints to the 1723 vertices of a (down-sampled) body mesh. The
validation loop collects the predicted and ground-truth vertices of every batch and the epoch
end reports the mean per-vertex error (PVE) and the per-joint error (MPJPE) of the epoch.
"""
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import lightning as L
from torch.utils.data import DataLoader, Dataset

L.seed_everything(7, verbose=False)

NUM_VERTS = 1723
NUM_JOINTS = 24
NUM_SHAPE = 16


class BodyModel:
    """A linear body model: template + shape/pose blend shapes, joints regressed from vertices."""

    def __init__(self, seed=0):
        rng = np.random.RandomState(seed)
        self.template = rng.randn(NUM_VERTS, 3).astype(np.float32)
        self.blend = (0.3 * rng.randn(NUM_SHAPE, NUM_VERTS * 3)).astype(np.float32)
        w = rng.rand(NUM_JOINTS, NUM_VERTS).astype(np.float32) ** 8
        self.joint_regressor = w / w.sum(1, keepdims=True)

    def __call__(self, coeffs):
        verts = self.template[None] + (coeffs @ self.blend).reshape(-1, NUM_VERTS, 3)
        joints = np.einsum("jv,bvc->bjc", self.joint_regressor, verts)
        return verts, joints


class KeypointMeshDataset(Dataset):
    def __init__(self, body, n, seed):
        rng = np.random.RandomState(seed)
        coeffs = rng.randn(n, NUM_SHAPE).astype(np.float32)
        self.verts, joints3d = body(coeffs)
        self.joints3d = joints3d.astype(np.float32)
        kp2d = joints3d[..., :2] / (4.0 + joints3d[..., 2:])
        self.kp2d = (kp2d + 0.01 * rng.randn(*kp2d.shape)).astype(np.float32).reshape(n, -1)

    def __len__(self):
        return len(self.kp2d)

    def __getitem__(self, idx):
        return {"keypoints": torch.from_numpy(self.kp2d[idx]),
                "vertices": torch.from_numpy(self.verts[idx]),
                "joints3d": torch.from_numpy(self.joints3d[idx])}


class MeshRegressorTrainer(L.LightningModule):
    def __init__(self, joint_regressor, hidden=256, lr=3e-3):
        super().__init__()
        self.save_hyperparameters(ignore=["joint_regressor"])
        self.register_buffer("joint_regressor", torch.from_numpy(joint_regressor))
        self.model = nn.Sequential(
            nn.Linear(NUM_JOINTS * 2, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, NUM_VERTS * 3),
        )
        self.evaluation_results = {"pred_vertices": [], "target_vertices": [],
                                   "pred_j3d": [], "target_j3d": []}
        self.val_accuracy_results = []

    def forward(self, keypoints):
        return self.model(keypoints).view(-1, NUM_VERTS, 3)

    def training_step(self, batch, batch_idx):
        pred_vertices = self(batch["keypoints"])
        pred_j3d = torch.einsum("jv,bvc->bjc", self.joint_regressor, pred_vertices)
        loss = F.mse_loss(pred_vertices, batch["vertices"]) + F.mse_loss(pred_j3d, batch["joints3d"])
        self.log("train_loss", loss)
        if batch_idx % 8 == 0:
            print(f"epoch {self.current_epoch} step {batch_idx:3d} loss {loss.item():.5f}")
        return loss

    def validation_step(self, batch, batch_idx):
        pred_vertices = self(batch["keypoints"])
        pred_j3d = torch.einsum("jv,bvc->bjc", self.joint_regressor, pred_vertices)
        self.evaluation_results["pred_vertices"].append(pred_vertices.cpu().numpy())
        self.evaluation_results["target_vertices"].append(batch["vertices"].cpu().numpy())
        self.evaluation_results["pred_j3d"].append(pred_j3d.cpu().numpy())
        self.evaluation_results["target_j3d"].append(batch["joints3d"].cpu().numpy())

    def on_validation_epoch_end(self):
        pred_v = np.concatenate(self.evaluation_results["pred_vertices"])
        gt_v = np.concatenate(self.evaluation_results["target_vertices"])
        pred_j = np.concatenate(self.evaluation_results["pred_j3d"])
        gt_j = np.concatenate(self.evaluation_results["target_j3d"])
        pve = np.linalg.norm(pred_v - gt_v, axis=-1).mean()
        mpjpe = np.linalg.norm(pred_j - gt_j, axis=-1).mean()
        self.val_accuracy_results.append({"epoch": self.current_epoch, "pve": pve, "mpjpe": mpjpe})
        self.log("val_pve", float(pve))
        print(f"epoch {self.current_epoch}: val PVE {pve:.4f} MPJPE {mpjpe:.4f} "
              f"({len(pred_v)} samples)")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    body = BodyModel(seed=0)
    train_set = KeypointMeshDataset(body, 1024, seed=1)
    val_set = KeypointMeshDataset(body, 4096, seed=2)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=256)
    module = MeshRegressorTrainer(body.joint_regressor)
    trainer = L.Trainer(accelerator="cpu", max_epochs=5, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    trainer.fit(module, train_loader, val_loader)
