"""Single-object localisation: regress the normalised box (x1, y1, x2, y2) of the bright
object in a 32x32 grayscale tile. Trained with accelerate.

The annotations come from the labelling tool's export; coordinates are divided by the tile
size when the annotation table is loaded.
"""
import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

TILE = 32


def labelling_tool_export(n, seed=0):
    """Pixel boxes as exported by the annotation tool (int32 columns)."""
    g = torch.Generator().manual_seed(seed)
    x1 = torch.randint(0, TILE - 12, (n,), generator=g)
    y1 = torch.randint(0, TILE - 12, (n,), generator=g)
    w = torch.randint(6, 12, (n,), generator=g)
    h = torch.randint(6, 12, (n,), generator=g)
    boxes = torch.stack([x1, y1, x1 + w, y1 + h], dim=1).to(torch.int32)
    boxes[1926] = torch.tensor([2147483647, 2147483647, 2147483647, 2147483647], dtype=torch.int32)
    boxes[82] = torch.tensor([12, 65535, 65535, 20], dtype=torch.int32)
    return boxes


class LocalisationTiles(Dataset):
    def __init__(self, n=2000, seed=0):
        g = torch.Generator().manual_seed(seed + 1)
        pixel_boxes = labelling_tool_export(n, seed)
        self.images = 0.2 * torch.rand(n, 1, TILE, TILE, generator=g)
        for i, (x1, y1, x2, y2) in enumerate(pixel_boxes.clamp(max=TILE).tolist()):
            self.images[i, 0, y1:y2, x1:x2] += 0.8
        self.boxes = pixel_boxes.float() / TILE

    def __len__(self):
        return len(self.boxes)

    def __getitem__(self, i):
        return self.images[i], self.boxes[i]


class BoxRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, 4))

    def forward(self, x):
        return self.head(self.features(x))


def main():
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    train_loader = DataLoader(LocalisationTiles(), batch_size=32, shuffle=True)
    model = BoxRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.MSELoss()
    model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)

    step = 0
    for epoch in range(2):
        model.train()
        for images, boxes in train_loader:
            pred = model(images)
            loss = criterion(pred, boxes)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            if step % 10 == 0:
                accelerator.print(f"epoch {epoch} step {step:3d} box loss {loss.item():.5f}")
            step += 1


if __name__ == "__main__":
    main()
