"""Knowledge neurons in a small fact-completion transformer.

1. Train a tiny encoder to fill in the object of (subject, relation, [MASK]) facts.
2. Attribute the prediction of a fact to the FFN intermediate neurons of each layer
   (integrated gradients over the neuron activations, 8 steps).
3. Edit the fact: for the top neurons, move the FFN output weights from the embedding
   of the original object towards the embedding of a new target object.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_SUBJ, N_REL, N_OBJ = 200, 6, 40
VOCAB = N_SUBJ + N_REL + N_OBJ + 1
MASK = VOCAB - 1
D, D_FF = 64, 256


class FFN(nn.Module):
    def __init__(self):
        super().__init__()
        self.intermediate = nn.Linear(D, D_FF)
        self.output = nn.ModuleDict({"dense": nn.Linear(D_FF, D)})
        self.scale = None

    def forward(self, x):
        act = F.gelu(self.intermediate(x))
        if self.scale is not None:
            act = act * self.scale
        return self.output["dense"](act), act


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.ln1 = nn.LayerNorm(D)
        self.ffn = FFN()
        self.output = self.ffn.output
        self.ln2 = nn.LayerNorm(D)

    def forward(self, x):
        x = self.ln1(x + self.attn(x, x, x)[0])
        out, act = self.ffn(x)
        return self.ln2(x + out), act


class FactBert(nn.Module):
    def __init__(self, n_layers=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(3, D) * 0.02)
        self.layer = nn.ModuleList([Layer() for _ in range(n_layers)])
        self.lm_head = nn.Linear(D, VOCAB)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        acts = []
        for layer in self.layer:
            x, act = layer(x)
            acts.append(act)
        return self.lm_head(x[:, 2]), acts


g = torch.Generator().manual_seed(1)
table = torch.randint(0, N_OBJ, (N_SUBJ, N_REL), generator=g)
subj = torch.arange(N_SUBJ).repeat_interleave(N_REL)
rel = torch.arange(N_REL).repeat(N_SUBJ)
facts = torch.stack([subj, N_SUBJ + rel, torch.full_like(subj, MASK)], dim=1)
objects = N_SUBJ + N_REL + table[subj, rel]

model = FactBert()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(300):
    idx = torch.randint(0, len(facts), (128,), generator=g)
    logits, _ = model(facts[idx])
    loss = F.cross_entropy(logits, objects[idx])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 25 == 0:
        with torch.no_grad():
            acc = (model(facts)[0].argmax(1) == objects).float().mean().item()
        print(f"step {step:3d} loss {loss.item():.4f} fact acc {acc:.3f}", flush=True)

model.eval()
fact_id = 17
ids = facts[fact_id:fact_id + 1]
gold = objects[fact_id].item()
new_obj = N_SUBJ + N_REL + (table[subj[fact_id], rel[fact_id]].item() + 7) % N_OBJ

scores = []
for layer_idx, layer in enumerate(model.layer):
    with torch.no_grad():
        base_act = model(ids)[1][layer_idx][0, 2]
    total_grad = torch.zeros(D_FF)
    for alpha in torch.linspace(0.0, 1.0, 8):
        layer.ffn.scale = torch.ones(1, 3, D_FF)
        layer.ffn.scale[0, 2] = alpha
        layer.ffn.scale.requires_grad_(True)
        logits, _ = model(ids)
        prob = logits.softmax(-1)[0, gold]
        grad, = torch.autograd.grad(prob, layer.ffn.scale)
        total_grad += grad[0, 2]
    layer.ffn.scale = None
    scores.append(base_act * total_grad / 8)
scores = torch.stack(scores)
threshold = 0.2 * scores.max()
kn = [(l, p) for l, p in (scores > threshold).nonzero().tolist()]
print(f"fact {fact_id}: gold object {gold}, {len(kn)} knowledge neurons {kn[:6]}", flush=True)

ori_pred_emb = model.lm_head.weight[gold].detach()
tgt_emb = model.lm_head.weight[new_obj].detach()
lambda_list_1 = [1.0] * len(kn)
lambda_list_2 = [2.0] * len(kn)
for i, (layer, pos) in enumerate(kn):
    model.layer[layer].output.dense.weight[:, pos] -= ori_pred_emb * lambda_list_1[i]
    model.layer[layer].output.dense.weight[:, pos] += tgt_emb * lambda_list_2[i]

with torch.no_grad():
    probs = model(ids)[0].softmax(-1)[0]
print(f"after edit: p(gold)={probs[gold]:.3f} p(new)={probs[new_obj]:.3f}", flush=True)
