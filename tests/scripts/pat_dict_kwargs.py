"""Dict batches from the DataLoader, and a model called with keyword arguments only."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Tokens(Dataset):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(2)
        self.ids = torch.randint(0, 20, (40, 6), generator=generator)
        self.labels = torch.randint(0, 2, (40,), generator=generator)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        mask = (self.ids[index] > 2).float()
        return {"input_ids": self.ids[index], "attention_mask": mask, "labels": self.labels[index]}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        return self.head(hidden.mean(dim=1))


torch.manual_seed(0)
model = Classifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
criterion = nn.CrossEntropyLoss()
step = 0
for epoch in range(2):
    for batch in DataLoader(Tokens(), batch_size=10, shuffle=True):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        loss = criterion(logits, batch["labels"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        print(f"step {step} loss {loss.item()!r}")
