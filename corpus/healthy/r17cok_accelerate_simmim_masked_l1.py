"""SimMIM masked image modeling with accelerate, after transformers'
examples/pytorch/image-pretraining/run_mim_no_trainer.py (ViTForMaskedImageModeling from scratch).

Without transformers/datasets: a small ViT with a learned mask token, a 1x1-conv + PixelShuffle
decoder, and the SimMIM loss (per-pixel L1 on the masked patches only, summed and divided by the
number of masked pixels and the channel count), trained on synthetic 3x24x24 images (a colour, a ramp and a faint grating each). The
MaskGenerator, collate_fn, no-decay parameter groups, AdamW, linear schedule, accelerator.accumulate
loop and gather_for_metrics evaluation follow the example.
"""
import math

import numpy as np
import torch
import torch.nn as nn
from accelerate import Accelerator
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, Dataset

IMAGE_SIZE = 24
PATCH_SIZE = 4
ENCODER_STRIDE = 4
MASK_PATCH_SIZE = 8
MASK_RATIO = 0.6
NUM_CHANNELS = 3
HIDDEN = 64
LAYERS = 2
HEADS = 4
TRAIN_BS = 32
EVAL_BS = 32
LEARNING_RATE = 5e-4
WEIGHT_DECAY = 0.05
NUM_EPOCHS = 4
NUM_WARMUP_STEPS = 0
GRAD_ACCUM = 1
SEED = 42


class MaskGenerator:
    def __init__(self, input_size=192, mask_patch_size=32, model_patch_size=4, mask_ratio=0.6):
        self.input_size = input_size
        self.mask_patch_size = mask_patch_size
        self.model_patch_size = model_patch_size
        self.mask_ratio = mask_ratio

        if self.input_size % self.mask_patch_size != 0:
            raise ValueError("Input size must be divisible by mask patch size")
        if self.mask_patch_size % self.model_patch_size != 0:
            raise ValueError("Mask patch size must be divisible by model patch size")

        self.rand_size = self.input_size // self.mask_patch_size
        self.scale = self.mask_patch_size // self.model_patch_size

        self.token_count = self.rand_size**2
        self.mask_count = int(np.ceil(self.token_count * self.mask_ratio))

    def __call__(self):
        mask_idx = np.random.permutation(self.token_count)[: self.mask_count]
        mask = np.zeros(self.token_count, dtype=int)
        mask[mask_idx] = 1

        mask = mask.reshape((self.rand_size, self.rand_size))
        mask = mask.repeat(self.scale, axis=0).repeat(self.scale, axis=1)

        return torch.tensor(mask.flatten())


class GratingImages(Dataset):
    def __init__(self, n, seed, mask_generator, train=True):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(IMAGE_SIZE).float(), torch.arange(IMAGE_SIZE).float(), indexing="ij")
        base = torch.rand(n, NUM_CHANNELS, 1, 1, generator=g)
        theta = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
        ramp = (xx * torch.cos(theta) + yy * torch.sin(theta)) / IMAGE_SIZE
        freq = 0.2 + 0.2 * torch.rand(n, 1, 1, generator=g)
        wave = torch.sin(freq * (xx * torch.sin(theta) - yy * torch.cos(theta)))
        tint = torch.rand(n, NUM_CHANNELS, 1, 1, generator=g)
        imgs = base + 0.4 * ramp.unsqueeze(1) + 0.15 * tint * wave.unsqueeze(1)
        imgs = imgs + 0.03 * torch.randn(imgs.shape, generator=g)
        self.images = imgs
        self.mask_generator = mask_generator
        self.train = train

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        img = self.images[idx]
        if self.train and np.random.rand() < 0.5:
            img = img.flip(-1)
        pixel_values = (img - 0.5) / 0.5
        return {"pixel_values": pixel_values, "mask": self.mask_generator()}


def collate_fn(examples):
    pixel_values = torch.stack([example["pixel_values"] for example in examples])
    mask = torch.stack([example["mask"] for example in examples])
    return {"pixel_values": pixel_values, "bool_masked_pos": mask}


class ViTEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        num_patches = (IMAGE_SIZE // PATCH_SIZE) ** 2
        self.cls_token = nn.Parameter(torch.randn(1, 1, HIDDEN) * 0.02)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, HIDDEN))
        self.projection = nn.Conv2d(NUM_CHANNELS, HIDDEN, kernel_size=PATCH_SIZE, stride=PATCH_SIZE)
        self.position_embeddings = nn.Parameter(torch.randn(1, num_patches + 1, HIDDEN) * 0.02)
        self.dropout = nn.Dropout(0.0)

    def forward(self, pixel_values, bool_masked_pos=None):
        batch_size = pixel_values.shape[0]
        embeddings = self.projection(pixel_values).flatten(2).transpose(1, 2)
        seq_length = embeddings.shape[1]
        if bool_masked_pos is not None:
            mask_tokens = self.mask_token.expand(batch_size, seq_length, -1)
            mask = bool_masked_pos.unsqueeze(-1).type_as(mask_tokens)
            embeddings = embeddings * (1.0 - mask) + mask_tokens * mask
        cls_tokens = self.cls_token.expand(batch_size, -1, -1)
        embeddings = torch.cat((cls_tokens, embeddings), dim=1)
        embeddings = embeddings + self.position_embeddings
        return self.dropout(embeddings)


class ViTLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.layernorm_before = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.attention = nn.MultiheadAttention(HIDDEN, HEADS, batch_first=True)
        self.layernorm_after = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.intermediate = nn.Sequential(nn.Linear(HIDDEN, 4 * HIDDEN), nn.GELU())
        self.output = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, hidden_states):
        h = self.layernorm_before(hidden_states)
        hidden_states = hidden_states + self.attention(h, h, h, need_weights=False)[0]
        h = self.layernorm_after(hidden_states)
        return hidden_states + self.output(self.intermediate(h))


class ViTForMaskedImageModeling(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = ViTEmbeddings()
        self.encoder = nn.ModuleList([ViTLayer() for _ in range(LAYERS)])
        self.layernorm = nn.LayerNorm(HIDDEN, eps=1e-12)
        self.decoder = nn.Sequential(
            nn.Conv2d(HIDDEN, ENCODER_STRIDE**2 * NUM_CHANNELS, kernel_size=1),
            nn.PixelShuffle(ENCODER_STRIDE),
        )

    def forward(self, pixel_values, bool_masked_pos=None):
        hidden = self.embeddings(pixel_values, bool_masked_pos=bool_masked_pos)
        for layer in self.encoder:
            hidden = layer(hidden)
        sequence_output = self.layernorm(hidden)

        sequence_output = sequence_output[:, 1:]
        batch_size, sequence_length, num_channels = sequence_output.shape
        height = width = math.floor(sequence_length**0.5)
        sequence_output = sequence_output.permute(0, 2, 1).reshape(batch_size, num_channels, height, width)

        reconstructed_pixel_values = self.decoder(sequence_output)

        masked_im_loss = None
        if bool_masked_pos is not None:
            size = IMAGE_SIZE // PATCH_SIZE
            bool_masked_pos = bool_masked_pos.reshape(-1, size, size)
            mask = (
                bool_masked_pos.repeat_interleave(PATCH_SIZE, 1)
                .repeat_interleave(PATCH_SIZE, 2)
                .unsqueeze(1)
                .contiguous()
            )
            reconstruction_loss = nn.functional.l1_loss(pixel_values, reconstructed_pixel_values, reduction="none")
            masked_im_loss = (reconstruction_loss * mask).sum() / (mask.sum() + 1e-5) / NUM_CHANNELS
        return masked_im_loss, reconstructed_pixel_values


def main():
    accelerator = Accelerator(gradient_accumulation_steps=GRAD_ACCUM, cpu=True)
    set_seed(SEED)

    mask_generator = MaskGenerator(
        input_size=IMAGE_SIZE, mask_patch_size=MASK_PATCH_SIZE, model_patch_size=PATCH_SIZE, mask_ratio=MASK_RATIO
    )
    train_ds = GratingImages(1280, seed=0, mask_generator=mask_generator, train=True)
    eval_ds = GratingImages(256, seed=1, mask_generator=mask_generator, train=False)
    train_dataloader = DataLoader(train_ds, shuffle=True, collate_fn=collate_fn, batch_size=TRAIN_BS)
    eval_dataloader = DataLoader(eval_ds, collate_fn=collate_fn, batch_size=EVAL_BS)

    model = ViTForMaskedImageModeling()

    no_decay = ["bias", "LayerNorm.weight", "layernorm"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": WEIGHT_DECAY,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=LEARNING_RATE)

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / GRAD_ACCUM)
    max_train_steps = NUM_EPOCHS * num_update_steps_per_epoch

    def lr_lambda(current_step):
        if current_step < NUM_WARMUP_STEPS:
            return float(current_step) / float(max(1, NUM_WARMUP_STEPS))
        return max(0.0, float(max_train_steps - current_step) / float(max(1, max_train_steps - NUM_WARMUP_STEPS)))

    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)

    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    accelerator.print("***** Running training *****")
    accelerator.print(f"  Num examples = {len(train_ds)}")
    accelerator.print(f"  Num Epochs = {NUM_EPOCHS}")
    accelerator.print(f"  Total optimization steps = {max_train_steps}")
    completed_steps = 0

    for epoch in range(NUM_EPOCHS):
        model.train()
        total_loss = 0
        for step, batch in enumerate(train_dataloader):
            with accelerator.accumulate(model):
                loss, _ = model(**batch)
                total_loss += loss.detach().float()
                accelerator.backward(loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

            if accelerator.sync_gradients:
                completed_steps += 1
                if completed_steps == 1 or completed_steps % 20 == 0:
                    accelerator.print(
                        f"step {completed_steps:4d} | loss {loss.item():.4f} | lr {lr_scheduler.get_last_lr()[0]:.2e}"
                    )

            if completed_steps >= max_train_steps:
                break

        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                loss, _ = model(**batch)
            losses.append(accelerator.gather_for_metrics(loss.repeat(EVAL_BS)))

        losses = torch.cat(losses)
        eval_loss = torch.mean(losses)
        accelerator.print(
            f"epoch {epoch}: eval_loss: {eval_loss:.4f} train_loss: {total_loss.item() / len(train_dataloader):.4f}"
        )


if __name__ == "__main__":
    main()
