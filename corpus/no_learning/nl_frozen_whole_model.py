"""Fine-tuning a small pretrained BERT-style encoder for event-order classification.

Each example is a short tokenized sentence that mentions two events, START and END;
the label says whether START is mentioned before END (1) or after it (0).
The encoder stands in for `AutoModel.from_pretrained(...)`: its weights are built with a
fixed seed because nothing is downloaded here. A small two-layer head sits on top of
the pooled [CLS] output, as in the usual "fine-tune BERT for classification" recipe.
"""
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

torch.manual_seed(0)
np.random.seed(0)

device = torch.device("cpu")

VOCAB_SIZE = 64
MAX_SEQ_LEN = 16
PAD_ID, CLS_ID, START_ID, END_ID = 0, 1, 2, 3
WORD_IDS = np.arange(8, VOCAB_SIZE)


def make_sentences(n, rng):
    """[CLS] w w START w w END w ... [PAD]; the two events at random positions."""
    seq = np.full((n, MAX_SEQ_LEN), PAD_ID, dtype=np.int64)
    mask = np.zeros((n, MAX_SEQ_LEN), dtype=np.int64)
    labels = np.zeros(n, dtype=np.int64)
    for i in range(n):
        length = rng.integers(10, MAX_SEQ_LEN + 1)
        seq[i, 0] = CLS_ID
        seq[i, 1:length] = rng.choice(WORD_IDS, size=length - 1)
        a, b = rng.choice(np.arange(1, length), size=2, replace=False)
        seq[i, a], seq[i, b] = START_ID, END_ID
        mask[i, :length] = 1
        labels[i] = int(a < b)
    return torch.tensor(seq), torch.tensor(mask), torch.tensor(labels)


class TinyBertModel(nn.Module):
    def __init__(self, vocab_size=VOCAB_SIZE, hidden_size=64, num_layers=2, num_heads=4):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD_ID)
        self.position_embeddings = nn.Embedding(MAX_SEQ_LEN, hidden_size)
        self.embedding_norm = nn.LayerNorm(hidden_size)
        layer = nn.TransformerEncoderLayer(hidden_size, num_heads, 4 * hidden_size, dropout=0.1,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden_size, hidden_size)

    def forward(self, input_ids, attention_mask):
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        h = self.embedding_norm(self.word_embeddings(input_ids) + self.position_embeddings(positions))
        h = self.encoder(h, src_key_padding_mask=attention_mask == 0)
        pooled = torch.tanh(self.pooler(h[:, 0]))
        return h, pooled


def load_pretrained_bert():
    torch.manual_seed(42)
    return TinyBertModel()


class BERT_Arch(nn.Module):

    def __init__(self, bert):
        super(BERT_Arch, self).__init__()
        self.bert = bert
        # dropout layer
        self.dropout = nn.Dropout(0.1)
        # relu activation function
        self.relu = nn.ReLU()
        # dense layer 1
        self.fc1 = nn.Linear(64, 512)
        # dense layer 2 (Output layer)
        self.fc2 = nn.Linear(512, 2)
        # softmax activation function
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, sent_id, mask):
        _, cls_hs = self.bert(sent_id, attention_mask=mask)
        x = self.fc1(cls_hs)
        x = self.relu(x)
        x = self.dropout(x)
        x = self.fc2(x)
        return self.softmax(x)


rng = np.random.default_rng(0)
train_seq, train_mask, train_y = make_sentences(1600, rng)
val_seq, val_mask, val_y = make_sentences(320, rng)

batch_size = 32
train_data = TensorDataset(train_seq, train_mask, train_y)
train_dataloader = DataLoader(train_data, sampler=RandomSampler(train_data), batch_size=batch_size)
val_data = TensorDataset(val_seq, val_mask, val_y)
val_dataloader = DataLoader(val_data, sampler=SequentialSampler(val_data), batch_size=batch_size)

bert = load_pretrained_bert()

# freeze all the parameters
for param in bert.parameters():
    param.requires_grad = False

model = BERT_Arch(bert)
model = model.to(device)

optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

# class weights ('balanced')
counts = np.bincount(train_y.numpy())
class_wts = len(train_y) / (2 * counts)
print("class weights:", class_wts)
weights = torch.tensor(class_wts, dtype=torch.float).to(device)
cross_entropy = nn.NLLLoss(weight=weights)

epochs = 4


def train():
    model.train()
    total_loss = 0
    for step, batch in enumerate(train_dataloader):
        if step % 10 == 0 and not step == 0:
            print('  Batch {:>5,}  of  {:>5,}.  loss {:.4f}'.format(step, len(train_dataloader), loss.item()))
        batch = [r.to(device) for r in batch]
        sent_id, mask, labels = batch
        model.zero_grad()
        preds = model(sent_id, mask)
        loss = cross_entropy(preds, labels)
        total_loss = total_loss + loss.item()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return total_loss / len(train_dataloader)


def evaluate():
    model.eval()
    total_loss, correct = 0, 0
    for step, batch in enumerate(val_dataloader):
        sent_id, mask, labels = [t.to(device) for t in batch]
        with torch.no_grad():
            preds = model(sent_id, mask)
            loss = cross_entropy(preds, labels)
            total_loss = total_loss + loss.item()
            correct += (preds.argmax(dim=1) == labels).sum().item()
    return total_loss / len(val_dataloader), correct / len(val_data)


best_valid_loss = float('inf')
for epoch in range(epochs):
    print('\n Epoch {:} / {:}'.format(epoch + 1, epochs))
    train_loss = train()
    valid_loss, valid_acc = evaluate()
    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
    print(f'\nTraining Loss: {train_loss:.3f}')
    print(f'Validation Loss: {valid_loss:.3f}  Accuracy: {valid_acc:.3f}')
