"""News-topic classification with nn.EmbeddingBag + Linear, after the PyTorch "Text classification
with the torchtext library" tutorial (beginner_source/text_sentiment_ngrams_tutorial.py).

AG_NEWS is replaced by a synthetic four-topic corpus: every document mixes Zipf-distributed
common words with words drawn from its topic's vocabulary. Same recipe as the tutorial: SGD with
lr=5, gradient-norm clipping at 0.1, StepLR(gamma=0.1) stepped only when validation accuracy
drops, variable-length documents packed with offsets instead of padding.
"""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.dataset import random_split

torch.manual_seed(0)
device = torch.device("cpu")

######################################################################
# Synthetic corpus standing in for AG_NEWS
# ----------------------------------------

NUM_CLASS = 4
VOCAB_SIZE = 1200
N_COMMON = 800  # function words shared by all topics, ids 1..799 (0 = <unk>)
TOPIC_WORDS = (VOCAB_SIZE - N_COMMON) // NUM_CLASS


class SyntheticNews(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        ranks = torch.arange(1, N_COMMON, dtype=torch.float)
        zipf = 1.0 / ranks
        self.samples = []
        for _ in range(n):
            label = int(torch.randint(0, NUM_CLASS, (1,), generator=g))
            length = int(torch.randint(12, 48, (1,), generator=g))
            n_topic = max(1, int(length * 0.3))
            common = torch.multinomial(zipf, length - n_topic, replacement=True, generator=g) + 1
            # a quarter of the topic words come from a neighbouring topic: the labels stay noisy
            topic = torch.where(torch.rand(n_topic, generator=g) < 0.25,
                                torch.randint(0, NUM_CLASS, (n_topic,), generator=g),
                                torch.full((n_topic,), label))
            words = N_COMMON + topic * TOPIC_WORDS + torch.randint(0, TOPIC_WORDS, (n_topic,), generator=g)
            text = torch.cat([common, words])[torch.randperm(length, generator=g)]
            self.samples.append((label + 1, text))  # labels 1..4 as in AG_NEWS

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, idx):
        return self.samples[idx]


label_pipeline = lambda x: int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = _text.to(torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


######################################################################
# Define the model
# ----------------


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


emsize = 64
model = TextClassificationModel(VOCAB_SIZE, emsize, NUM_CLASS).to(device)


def train(dataloader):
    model.train()
    total_acc, total_count, total_loss = 0, 0, 0.0
    log_interval = 20
    start_time = time.time()

    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        total_loss += loss.item() * label.size(0)
        if idx % log_interval == 0 and idx > 0:
            elapsed = time.time() - start_time
            print(
                "| epoch {:3d} | {:5d}/{:5d} batches "
                "| accuracy {:8.3f} | loss {:6.3f}".format(
                    epoch, idx, len(dataloader), total_acc / total_count, total_loss / total_count
                )
            )
            total_acc, total_count, total_loss = 0, 0, 0.0
            start_time = time.time()


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0

    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


# Hyperparameters
EPOCHS = 10  # epoch
LR = 5  # learning rate
BATCH_SIZE = 64  # batch size for training

criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset = SyntheticNews(4000, seed=1)
test_dataset = SyntheticNews(800, seed=2)
num_train = int(len(train_dataset) * 0.95)
split_train_, split_valid_ = random_split(
    train_dataset, [num_train, len(train_dataset) - num_train]
)

train_dataloader = DataLoader(
    split_train_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch
)
valid_dataloader = DataLoader(
    split_valid_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch
)
test_dataloader = DataLoader(
    test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch
)

for epoch in range(1, EPOCHS + 1):
    epoch_start_time = time.time()
    train(train_dataloader)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print("-" * 59)
    print(
        "| end of epoch {:3d} | time: {:5.2f}s | "
        "valid accuracy {:8.3f} ".format(
            epoch, time.time() - epoch_start_time, accu_val
        )
    )
    print("-" * 59)

print("Checking the results of test dataset.")
accu_test = evaluate(test_dataloader)
print("test accuracy {:8.3f}".format(accu_test))
