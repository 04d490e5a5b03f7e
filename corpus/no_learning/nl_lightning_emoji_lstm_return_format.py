"""Fine-tune a DeepMoji-style sentence classifier with PyTorch Lightning.

Embedding -> two BiLSTM layers -> attention pooling -> output layer, on a toy
sentiment task (sentences of word ids, label = more positive than negative words).
Like the original model, forward() accepts numpy arrays or LongTensors and
returns its output in the same format it was given.
"""
import tempfile

import lightning as L
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset

VOCAB = 200
MAXLEN = 12
POS_WORDS = np.arange(10, 30)
NEG_WORDS = np.arange(30, 50)


def make_sentences(n, seed):
    rng = np.random.RandomState(seed)
    X = np.zeros((n, MAXLEN), dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    for i in range(n):
        length = rng.randint(6, MAXLEN + 1)
        words = rng.randint(50, VOCAB, size=length)
        n_pos, n_neg = rng.randint(0, 4, size=2)
        while n_pos == n_neg:
            n_pos, n_neg = rng.randint(0, 4, size=2)
        slots = rng.choice(length, size=n_pos + n_neg, replace=False)
        words[slots[:n_pos]] = rng.choice(POS_WORDS, size=n_pos)
        words[slots[n_pos:]] = rng.choice(NEG_WORDS, size=n_neg)
        X[i, :length] = words
        y[i] = int(n_pos > n_neg)
    return X, y


class Attention(nn.Module):
    def __init__(self, attention_size):
        super().__init__()
        self.attention_vector = nn.Parameter(torch.empty(attention_size).uniform_(-0.05, 0.05))

    def forward(self, inputs, mask):
        logits = inputs.matmul(self.attention_vector)
        logits = logits.masked_fill(~mask, -1e9)
        weights = F.softmax(logits, dim=1)
        return (inputs * weights.unsqueeze(-1)).sum(dim=1), weights


class TorchMoji(nn.Module):
    def __init__(self, nb_classes=1, nb_tokens=VOCAB, embed_dim=32, hidden_size=32):
        super().__init__()
        self.embed = nn.Embedding(nb_tokens, embed_dim, padding_idx=0)
        self.lstm_0 = nn.LSTM(embed_dim, hidden_size, batch_first=True, bidirectional=True)
        self.lstm_1 = nn.LSTM(hidden_size * 2, hidden_size, batch_first=True, bidirectional=True)
        attention_size = 4 * hidden_size + embed_dim
        self.attention_layer = Attention(attention_size)
        self.final_dropout = nn.Dropout(0.1)
        self.output_layer = nn.Linear(attention_size, nb_classes)

    def forward(self, input_seqs):
        # Take note of the input format so that we return the same format
        return_numpy = False
        return_tensor = False
        if isinstance(input_seqs, torch.LongTensor):
            return_tensor = True
        elif not isinstance(input_seqs, torch.Tensor):
            input_seqs = torch.from_numpy(input_seqs.astype("int64")).long()
            return_numpy = True

        mask = input_seqs != 0
        x = torch.tanh(self.embed(input_seqs))
        lstm_0_output, _ = self.lstm_0(x)
        lstm_1_output, _ = self.lstm_1(lstm_0_output)
        # skip-connections from the embedding and the first LSTM to the attention layer
        features = torch.cat((lstm_1_output, lstm_0_output, x), dim=2)
        x, att_weights = self.attention_layer(features, mask)
        outputs = self.output_layer(self.final_dropout(x))

        # Adapt return format if needed
        if return_tensor:
            outputs = outputs.data
        if return_numpy:
            outputs = outputs.data.numpy()
        return outputs


class MojiFinetuner(L.LightningModule):
    def __init__(self, X_val, y_val, lr=3e-3):
        super().__init__()
        self.model = TorchMoji()
        self.loss_op = nn.BCEWithLogitsLoss()
        self.lr = lr
        self.X_val, self.y_val = X_val, y_val
        self.epoch_losses = []

    def training_step(self, batch, batch_idx):
        X_train, y_train = batch
        output = self.model(X_train)
        loss = self.loss_op(output.squeeze(-1), y_train.float())
        loss = Variable(loss, requires_grad=True)
        self.epoch_losses.append(loss.item())
        if self.global_step % 25 == 0:
            print(f"  step {self.global_step:4d}  train loss {loss.item():.4f}")
        return loss

    def on_train_epoch_end(self):
        self.model.eval()
        with torch.no_grad():
            val_out = self.model(self.X_val)  # numpy in, numpy out
        self.model.train()
        acc = ((val_out.squeeze(-1) > 0).astype(np.int64) == self.y_val).mean()
        print(f"epoch {self.current_epoch}  train loss {np.mean(self.epoch_losses):.4f}  val acc {acc:.3f}")
        self.epoch_losses = []

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=self.lr)


def main():
    L.seed_everything(1234, verbose=False)
    X_train, y_train = make_sentences(1280, seed=1)
    X_val, y_val = make_sentences(400, seed=2)
    train_loader = DataLoader(
        TensorDataset(torch.from_numpy(X_train), torch.from_numpy(y_train)),
        batch_size=32, shuffle=True,
    )

    module = MojiFinetuner(X_val, y_val)
    trainer = L.Trainer(
        max_epochs=4,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tempfile.mkdtemp(),
    )
    trainer.fit(module, train_loader)


if __name__ == "__main__":
    main()
