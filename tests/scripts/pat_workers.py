"""DataLoader workers (fork or spawn): the dataset class lives in ``__main__``, so spawned workers
must re-import this script to unpickle it. Prints every batch's loss and the final weights."""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        generator = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, 3, generator=generator)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.x[index]
        return x, (x * x).sum(dim=0, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--context", choices=["fork", "spawn"], required=True)
    args = parser.parse_args()
    torch.manual_seed(0)
    loader = DataLoader(Squares(48), batch_size=8, shuffle=True, num_workers=2,
                        multiprocessing_context=args.context)
    model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    step = 0
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        print(f"step {step} loss {loss.item()!r}")
    print("weights", repr(sum(p.double().sum().item() for p in model.parameters())))


if __name__ == "__main__":
    main()
