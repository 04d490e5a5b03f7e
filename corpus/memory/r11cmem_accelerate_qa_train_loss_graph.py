"""Extractive question answering (homework-style sample code), trained with accelerate.

Each example is a [CLS] question [SEP] paragraph [SEP] window of token ids; the model predicts
the start and end positions of the answer span in the paragraph. A small transformer encoder
stands in for the pretrained BERT; the loop follows the TA sample code: accelerator.prepare,
accelerator.backward, a linear learning-rate decay, and a log line every `logging_step` steps.
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

VOCAB = 2000
CLS, SEP, PAD = 1, 2, 0
ANSWER_VOCAB = range(1500, 1600)


class QA_Dataset(Dataset):
    def __init__(self, n, max_question_len=16, max_paragraph_len=157, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            q = torch.randint(3, 1500, (max_question_len,), generator=g)
            p = torch.randint(3, 1500, (max_paragraph_len,), generator=g)
            ans_len = int(torch.randint(2, 8, (1,), generator=g))
            start = int(torch.randint(0, max_paragraph_len - ans_len, (1,), generator=g))
            p[start:start + ans_len] = torch.randint(1500, 1600, (ans_len,), generator=g)
            input_ids = torch.cat([torch.tensor([CLS]), q, torch.tensor([SEP]), p, torch.tensor([SEP])])
            token_type_ids = torch.cat([torch.zeros(max_question_len + 2, dtype=torch.long),
                                        torch.ones(max_paragraph_len + 1, dtype=torch.long)])
            offset = max_question_len + 2
            self.items.append((input_ids, token_type_ids, torch.ones_like(input_ids),
                               offset + start, offset + start + ans_len - 1))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


@dataclass
class QuestionAnsweringModelOutput:
    loss: torch.Tensor
    start_logits: torch.Tensor
    end_logits: torch.Tensor


class BertForQuestionAnswering(nn.Module):
    def __init__(self, hidden_size=128, num_layers=2, num_heads=4, max_len=512):
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, hidden_size, padding_idx=PAD)
        self.position_embeddings = nn.Embedding(max_len, hidden_size)
        self.token_type_embeddings = nn.Embedding(2, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.qa_outputs = nn.Linear(hidden_size, 2)

    def forward(self, input_ids, token_type_ids, attention_mask, start_positions=None, end_positions=None):
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type_ids)
        h = self.encoder(self.LayerNorm(h), src_key_padding_mask=attention_mask == 0)
        start_logits, end_logits = self.qa_outputs(h).unbind(-1)
        loss = None
        if start_positions is not None:
            ce = nn.CrossEntropyLoss()
            loss = (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2
        return QuestionAnsweringModelOutput(loss, start_logits, end_logits)


def main():
    num_epoch = 1
    logging_step = 100
    learning_rate = 1e-3
    train_batch_size = 16

    accelerator = Accelerator(cpu=True)
    model = BertForQuestionAnswering()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    train_set = QA_Dataset(1920, seed=0)
    train_loader = DataLoader(train_set, batch_size=train_batch_size, shuffle=True, pin_memory=False)
    total_steps = num_epoch * len(train_loader)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / total_steps)
    model, optimizer, train_loader, scheduler = accelerator.prepare(model, optimizer, train_loader, scheduler)

    model.train()
    print("Start Training ...")
    for epoch in range(num_epoch):
        step = 1
        train_loss = train_acc = 0
        for data in train_loader:
            output = model(input_ids=data[0], token_type_ids=data[1], attention_mask=data[2],
                           start_positions=data[3], end_positions=data[4])

            start_index = torch.argmax(output.start_logits, dim=1)
            end_index = torch.argmax(output.end_logits, dim=1)

            train_acc += ((start_index == data[3]) & (end_index == data[4])).float().mean()
            train_loss += output.loss

            accelerator.backward(output.loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1

            if step % 10 == 0:
                print(f"  step {step}: batch loss {output.loss.item():.3f}")
            if step % logging_step == 0:
                print(f"Epoch {epoch + 1} | Step {step} | loss = {train_loss.item() / logging_step:.3f}, "
                      f"acc = {train_acc / logging_step:.3f}")
                train_loss = train_acc = 0


if __name__ == "__main__":
    main()
