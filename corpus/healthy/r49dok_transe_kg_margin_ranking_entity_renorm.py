"""TransE knowledge-graph embeddings (margin ranking loss, L1 distance, SGD) on a small
synthetic grid-world knowledge graph; reports filtered-free hits@10 / MRR on held-out triples."""
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils import data as torch_data

torch.manual_seed(1234)
np.random.seed(1234)


class TransE(nn.Module):

    def __init__(self, entity_count, relation_count, device, norm=1, dim=100, margin=1.0):
        super(TransE, self).__init__()
        self.entity_count = entity_count
        self.relation_count = relation_count
        self.device = device
        self.norm = norm
        self.dim = dim
        self.entities_emb = self._init_enitity_emb()
        self.relations_emb = self._init_relation_emb()
        self.criterion = nn.MarginRankingLoss(margin=margin)

    def _init_enitity_emb(self):
        entities_emb = nn.Embedding(num_embeddings=self.entity_count + 1,
                                    embedding_dim=self.dim,
                                    padding_idx=self.entity_count)
        uniform_range = 6 / np.sqrt(self.dim)
        entities_emb.weight.data.uniform_(-uniform_range, uniform_range)
        return entities_emb

    def _init_relation_emb(self):
        relations_emb = nn.Embedding(num_embeddings=self.relation_count + 1,
                                     embedding_dim=self.dim,
                                     padding_idx=self.relation_count)
        uniform_range = 6 / np.sqrt(self.dim)
        relations_emb.weight.data.uniform_(-uniform_range, uniform_range)
        # -1 to avoid nan for OOV vector
        relations_emb.weight.data[:-1, :].div_(relations_emb.weight.data[:-1, :].norm(p=1, dim=1, keepdim=True))
        return relations_emb

    def forward(self, positive_triplets, negative_triplets):
        # -1 to avoid nan for OOV vector
        self.entities_emb.weight.data[:-1, :].div_(self.entities_emb.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))
        positive_distances = self._distance(positive_triplets)
        negative_distances = self._distance(negative_triplets)
        return self.loss(positive_distances, negative_distances), positive_distances.sum(), negative_distances.sum()

    def predict(self, triplets):
        return self._distance(triplets)

    def loss(self, positive_distances, negative_distances):
        target = torch.tensor([-1], dtype=torch.long, device=self.device)
        return self.criterion(positive_distances, negative_distances, target)

    def _distance(self, triplets):
        heads = triplets[:, 0]
        relations = triplets[:, 1]
        tails = triplets[:, 2]
        return (self.entities_emb(heads) + self.relations_emb(relations) - self.entities_emb(tails)).norm(p=self.norm, dim=1)


def make_grid_kg(side=8):
    """Entities are cells of a side x side grid; relations: right, up, left, down (no wrap)."""
    moves = [(1, 0), (0, 1), (-1, 0), (0, -1)]
    triples = []
    for x in range(side):
        for y in range(side):
            for r, (dx, dy) in enumerate(moves):
                nx, ny = x + dx, y + dy
                if 0 <= nx < side and 0 <= ny < side:
                    triples.append((x * side + y, r, nx * side + ny))
    return np.array(triples), side * side, len(moves)


class KGDataset(torch_data.Dataset):
    def __init__(self, triples):
        self.triples = torch.as_tensor(triples, dtype=torch.long)

    def __len__(self):
        return len(self.triples)

    def __getitem__(self, idx):
        h, r, t = self.triples[idx]
        return h, r, t


def hit_at_k(predictions, ground_truth_idx, k=10):
    _, indices = predictions.topk(k=k, largest=False)
    return torch.where(indices == ground_truth_idx, 1, 0).sum().item()


def mrr(predictions, ground_truth_idx):
    indices = predictions.argsort()
    return (1.0 / (indices == ground_truth_idx).nonzero()[:, 1].float().add(1.0)).sum().item()


@torch.no_grad()
def test(model, data_generator, entities_count):
    examples_sum, hits_at_10, mrr_sum = 0.0, 0.0, 0.0
    for head, relation, tail in data_generator:
        bs = head.size()[0]
        all_entities = torch.arange(end=entities_count).unsqueeze(0).repeat(bs, 1)
        heads = head.reshape(-1, 1).repeat(1, all_entities.size()[1])
        relations = relation.reshape(-1, 1).repeat(1, all_entities.size()[1])
        tails = tail.reshape(-1, 1).repeat(1, all_entities.size()[1])
        triplets = torch.stack((heads, relations, all_entities), dim=2).reshape(-1, 3)
        tails_predictions = model.predict(triplets).reshape(bs, -1)
        triplets = torch.stack((all_entities, relations, tails), dim=2).reshape(-1, 3)
        heads_predictions = model.predict(triplets).reshape(bs, -1)
        predictions = torch.cat((tails_predictions, heads_predictions), dim=0)
        ground_truth_entity_id = torch.cat((tail.reshape(-1, 1), head.reshape(-1, 1)))
        hits_at_10 += hit_at_k(predictions, ground_truth_entity_id, k=10)
        mrr_sum += mrr(predictions, ground_truth_entity_id)
        examples_sum += bs * 2
    return hits_at_10 / examples_sum * 100, mrr_sum / examples_sum * 100


def main():
    device = torch.device("cpu")
    triples, entity_count, relation_count = make_grid_kg(side=8)
    perm = np.random.permutation(len(triples))
    n_valid = len(triples) // 10
    valid_triples, train_triples = triples[perm[:n_valid]], triples[perm[n_valid:]]
    print(f"entities={entity_count} relations={relation_count} train={len(train_triples)} valid={len(valid_triples)}")

    train_generator = torch_data.DataLoader(KGDataset(train_triples), batch_size=32, shuffle=True)
    validation_generator = torch_data.DataLoader(KGDataset(valid_triples), batch_size=32)

    model = TransE(entity_count=entity_count, relation_count=relation_count, dim=50,
                   margin=1.0, device=device, norm=1).to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.1)

    h10, m = test(model, validation_generator, entity_count)
    print(f"before training: valid hits@10 {h10:.1f}  MRR {m:.1f}")
    step = 0
    for epoch_id in range(1, 26):
        model.train()
        running = 0.0
        for local_heads, local_relations, local_tails in train_generator:
            positive_triples = torch.stack((local_heads, local_relations, local_tails), dim=1)
            broken_heads = local_heads.clone()
            broken_tails = local_tails.clone()
            current_batch_size = broken_heads.size()[0]
            for idx in range(current_batch_size):
                if torch.randint(high=2, size=(1,)).item() % 2 == 0:
                    broken_heads[idx] = torch.randint(high=entity_count, size=(1,))
                else:
                    broken_tails[idx] = torch.randint(high=entity_count, size=(1,))
            negative_triples = torch.stack((broken_heads, local_relations, broken_tails), dim=1)

            optimizer.zero_grad()
            loss, pd, nd = model(positive_triples, negative_triples)
            loss.backward()
            optimizer.step()
            running += loss.item()
            step += 1
        if epoch_id % 5 == 0:
            model.eval()
            h10, m = test(model, validation_generator, entity_count)
            print(f"epoch {epoch_id:2d} step {step:3d} train loss {running / len(train_generator):.4f} "
                  f"pos dist {pd.item() / current_batch_size:.3f} neg dist {nd.item() / current_batch_size:.3f} "
                  f"valid hits@10 {h10:.1f} MRR {m:.1f}")


if __name__ == "__main__":
    main()
