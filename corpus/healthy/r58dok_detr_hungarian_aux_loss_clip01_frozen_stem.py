"""DETR-style set-prediction detector on synthetic "shapes" images: 1-3 coloured
rectangles (three classes) on a noisy background, images of varying size padded into a
batch with a pixel mask. ResNet-style backbone with frozen batch norm (stem and layer1
frozen, as in DETR), transformer encoder-decoder with object queries, Hungarian matching,
auxiliary decoding losses, AdamW with a 10x lower backbone rate and gradient clipping."""
import argparse
import copy
import itertools
import math
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

parser = argparse.ArgumentParser('Set transformer detector', add_help=False)
parser.add_argument('--lr', default=5e-4, type=float)
parser.add_argument('--lr_backbone', default=5e-5, type=float)
parser.add_argument('--batch_size', default=8, type=int)
parser.add_argument('--weight_decay', default=1e-4, type=float)
parser.add_argument('--epochs', default=5, type=int)
parser.add_argument('--lr_drop', default=4, type=int)
parser.add_argument('--clip_max_norm', default=0.1, type=float, help='gradient clipping max norm')
parser.add_argument('--enc_layers', default=1, type=int)
parser.add_argument('--dec_layers', default=2, type=int)
parser.add_argument('--dim_feedforward', default=128, type=int)
parser.add_argument('--hidden_dim', default=64, type=int)
parser.add_argument('--dropout', default=0.1, type=float)
parser.add_argument('--nheads', default=4, type=int)
parser.add_argument('--num_queries', default=6, type=int)
parser.add_argument('--no_aux_loss', dest='aux_loss', action='store_false')
parser.add_argument('--set_cost_class', default=1, type=float)
parser.add_argument('--set_cost_bbox', default=5, type=float)
parser.add_argument('--set_cost_giou', default=2, type=float)
parser.add_argument('--bbox_loss_coef', default=5, type=float)
parser.add_argument('--giou_loss_coef', default=2, type=float)
parser.add_argument('--eos_coef', default=0.1, type=float)
parser.add_argument('--seed', default=42, type=int)
args = parser.parse_args()


# ----------------------------------------------------------------------------- box ops
def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1, boxes2):
    area1 = box_area(boxes1)
    area2 = box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    return iou, union


def generalized_box_iou(boxes1, boxes2):
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


# ----------------------------------------------------------------------------- data
class NestedTensor(object):
    def __init__(self, tensors, mask):
        self.tensors = tensors
        self.mask = mask

    def decompose(self):
        return self.tensors, self.mask


def nested_tensor_from_tensor_list(tensor_list):
    max_size = [max(s) for s in zip(*[img.shape for img in tensor_list])]
    b, (c, h, w) = len(tensor_list), max_size
    tensor = torch.zeros((b, c, h, w), dtype=tensor_list[0].dtype)
    mask = torch.ones((b, h, w), dtype=torch.bool)
    for img, pad_img, m in zip(tensor_list, tensor, mask):
        pad_img[: img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
        m[: img.shape[1], :img.shape[2]] = False
    return NestedTensor(tensor, mask)


def collate_fn(batch):
    batch = list(zip(*batch))
    batch[0] = nested_tensor_from_tensor_list(batch[0])
    return tuple(batch)


COLOURS = torch.tensor([[0.9, 0.2, 0.2], [0.2, 0.8, 0.3], [0.25, 0.35, 0.95]])
MEAN, STD = torch.tensor([0.45, 0.45, 0.45]), torch.tensor([0.27, 0.27, 0.27])


class ShapesDetection(Dataset):
    """Each image: 1-3 filled rectangles, class = colour; boxes as normalised cx, cy, w, h."""

    def __init__(self, n, seed):
        rng = np.random.RandomState(seed)
        self.items = []
        for _ in range(n):
            h, w = rng.randint(28, 33), rng.randint(28, 33)
            img = 0.5 + 0.08 * rng.randn(3, h, w)
            boxes, labels = [], []
            for _ in range(rng.randint(1, 4)):
                bw, bh = rng.randint(6, 14), rng.randint(6, 14)
                x0, y0 = rng.randint(0, w - bw), rng.randint(0, h - bh)
                c = rng.randint(3)
                img[:, y0:y0 + bh, x0:x0 + bw] = COLOURS[c].numpy()[:, None, None] + 0.05 * rng.randn(3, bh, bw)
                boxes.append([(x0 + bw / 2) / w, (y0 + bh / 2) / h, bw / w, bh / h])
                labels.append(c)
            img = (torch.tensor(img, dtype=torch.float32) - MEAN[:, None, None]) / STD[:, None, None]
            target = {'boxes': torch.tensor(boxes, dtype=torch.float32),
                      'labels': torch.tensor(labels, dtype=torch.int64),
                      'orig_size': torch.tensor([h, w])}
            self.items.append((img, target))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


# ----------------------------------------------------------------------------- backbone
class FrozenBatchNorm2d(torch.nn.Module):
    def __init__(self, n):
        super(FrozenBatchNorm2d, self).__init__()
        self.register_buffer("weight", torch.ones(n))
        self.register_buffer("bias", torch.zeros(n))
        self.register_buffer("running_mean", torch.zeros(n))
        self.register_buffer("running_var", torch.ones(n))

    def forward(self, x):
        w = self.weight.reshape(1, -1, 1, 1)
        b = self.bias.reshape(1, -1, 1, 1)
        rv = self.running_var.reshape(1, -1, 1, 1)
        rm = self.running_mean.reshape(1, -1, 1, 1)
        eps = 1e-5
        scale = w * (rv + eps).rsqrt()
        bias = b - rm * scale
        return x * scale + bias


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = FrozenBatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = FrozenBatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            FrozenBatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 2, 1, bias=False)
        self.bn1 = FrozenBatchNorm2d(16)
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.layer3 = BasicBlock(32, 64, stride=2)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode='fan_out', nonlinearity='relu')

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        return self.layer3(self.layer2(self.layer1(x)))


class Backbone(nn.Module):
    def __init__(self, backbone, train_backbone, num_channels):
        super().__init__()
        for name, parameter in backbone.named_parameters():
            if not train_backbone or 'layer2' not in name and 'layer3' not in name and 'layer4' not in name:
                parameter.requires_grad_(False)
        self.body = backbone
        self.num_channels = num_channels

    def forward(self, tensor_list):
        x = self.body(tensor_list.tensors)
        m = tensor_list.mask
        mask = F.interpolate(m[None].float(), size=x.shape[-2:]).to(torch.bool)[0]
        return NestedTensor(x, mask)


class PositionEmbeddingSine(nn.Module):
    def __init__(self, num_pos_feats=64, temperature=10000, normalize=False, scale=None):
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        self.scale = 2 * math.pi if scale is None else scale

    def forward(self, tensor_list):
        x, mask = tensor_list.decompose()
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32)
        dim_t = self.temperature ** (2 * (dim_t // 2) / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class Joiner(nn.Sequential):
    def __init__(self, backbone, position_embedding):
        super().__init__(backbone, position_embedding)
        self.num_channels = backbone.num_channels

    def forward(self, tensor_list):
        out = self[0](tensor_list)
        return [out], [self[1](out).to(out.tensors.dtype)]


# ----------------------------------------------------------------------------- transformer
class TransformerEncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, src, src_key_padding_mask, pos):
        q = k = src + pos
        src2 = self.self_attn(q, k, value=src, key_padding_mask=src_key_padding_mask)[0]
        src = self.norm1(src + self.dropout1(src2))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout2(src2))


class TransformerDecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)

    def forward(self, tgt, memory, memory_key_padding_mask, pos, query_pos):
        q = k = tgt + query_pos
        tgt2 = self.self_attn(q, k, value=tgt)[0]
        tgt = self.norm1(tgt + self.dropout1(tgt2))
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory,
                                   key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout2(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout3(tgt2))


class Transformer(nn.Module):
    def __init__(self, d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout):
        super().__init__()
        enc = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout)
        dec = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout)
        self.encoder_layers = nn.ModuleList([copy.deepcopy(enc) for _ in range(num_encoder_layers)])
        self.decoder_layers = nn.ModuleList([copy.deepcopy(dec) for _ in range(num_decoder_layers)])
        self.decoder_norm = nn.LayerNorm(d_model)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        self.d_model = d_model

    def forward(self, src, mask, query_embed, pos_embed):
        bs, c, h, w = src.shape
        src = src.flatten(2).permute(2, 0, 1)
        pos_embed = pos_embed.flatten(2).permute(2, 0, 1)
        query_embed = query_embed.unsqueeze(1).repeat(1, bs, 1)
        mask = mask.flatten(1)
        tgt = torch.zeros_like(query_embed)
        memory = src
        for layer in self.encoder_layers:
            memory = layer(memory, src_key_padding_mask=mask, pos=pos_embed)
        output, intermediate = tgt, []
        for layer in self.decoder_layers:
            output = layer(output, memory, memory_key_padding_mask=mask, pos=pos_embed, query_pos=query_embed)
            intermediate.append(self.decoder_norm(output))
        return torch.stack(intermediate).transpose(1, 2)


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        self.num_layers = num_layers
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


class DETR(nn.Module):
    def __init__(self, backbone, transformer, num_classes, num_queries, aux_loss=False):
        super().__init__()
        self.num_queries = num_queries
        self.transformer = transformer
        hidden_dim = transformer.d_model
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.bbox_embed = MLP(hidden_dim, hidden_dim, 4, 3)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.input_proj = nn.Conv2d(backbone.num_channels, hidden_dim, kernel_size=1)
        self.backbone = backbone
        self.aux_loss = aux_loss

    def forward(self, samples):
        features, pos = self.backbone(samples)
        src, mask = features[-1].decompose()
        hs = self.transformer(self.input_proj(src), mask, self.query_embed.weight, pos[-1])
        outputs_class = self.class_embed(hs)
        outputs_coord = self.bbox_embed(hs).sigmoid()
        out = {'pred_logits': outputs_class[-1], 'pred_boxes': outputs_coord[-1]}
        if self.aux_loss:
            out['aux_outputs'] = [{'pred_logits': a, 'pred_boxes': b}
                                  for a, b in zip(outputs_class[:-1], outputs_coord[:-1])]
        return out


# ----------------------------------------------------------------------------- matcher / loss
_PERMS = {}


def linear_sum_assignment(cost):
    """Exact minimum-cost assignment of the (few) targets to distinct queries."""
    n_q, n_t = cost.shape
    if (n_q, n_t) not in _PERMS:
        _PERMS[n_q, n_t] = np.array(list(itertools.permutations(range(n_q), n_t)))
    perms = _PERMS[n_q, n_t]
    totals = cost[perms, np.arange(n_t)].sum(1)
    rows = perms[totals.argmin()]
    order = np.argsort(rows)
    return rows[order], np.arange(n_t)[order]


class HungarianMatcher(nn.Module):
    def __init__(self, cost_class=1, cost_bbox=1, cost_giou=1):
        super().__init__()
        self.cost_class = cost_class
        self.cost_bbox = cost_bbox
        self.cost_giou = cost_giou

    @torch.no_grad()
    def forward(self, outputs, targets):
        bs, num_queries = outputs["pred_logits"].shape[:2]
        out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
        out_bbox = outputs["pred_boxes"].flatten(0, 1)
        tgt_ids = torch.cat([v["labels"] for v in targets])
        tgt_bbox = torch.cat([v["boxes"] for v in targets])
        cost_class = -out_prob[:, tgt_ids]
        cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
        cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
        C = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
        C = C.view(bs, num_queries, -1).cpu()
        sizes = [len(v["boxes"]) for v in targets]
        indices = [linear_sum_assignment(c[i].numpy()) for i, c in enumerate(C.split(sizes, -1))]
        return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64)) for i, j in indices]


def accuracy(output, target):
    if target.numel() == 0:
        return torch.zeros([])
    pred = output.argmax(1)
    return pred.eq(target).float().sum().mul_(100.0 / target.size(0))


class SetCriterion(nn.Module):
    def __init__(self, num_classes, matcher, weight_dict, eos_coef, losses):
        super().__init__()
        self.num_classes = num_classes
        self.matcher = matcher
        self.weight_dict = weight_dict
        self.eos_coef = eos_coef
        self.losses = losses
        empty_weight = torch.ones(self.num_classes + 1)
        empty_weight[-1] = self.eos_coef
        self.register_buffer('empty_weight', empty_weight)

    def loss_labels(self, outputs, targets, indices, num_boxes, log=True):
        src_logits = outputs['pred_logits']
        idx = self._get_src_permutation_idx(indices)
        target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
        target_classes = torch.full(src_logits.shape[:2], self.num_classes, dtype=torch.int64)
        target_classes[idx] = target_classes_o
        loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
        losses = {'loss_ce': loss_ce}
        if log:
            losses['class_error'] = 100 - accuracy(src_logits[idx], target_classes_o)
        return losses

    @torch.no_grad()
    def loss_cardinality(self, outputs, targets, indices, num_boxes):
        pred_logits = outputs['pred_logits']
        tgt_lengths = torch.as_tensor([len(v["labels"]) for v in targets])
        card_pred = (pred_logits.argmax(-1) != pred_logits.shape[-1] - 1).sum(1)
        card_err = F.l1_loss(card_pred.float(), tgt_lengths.float())
        return {'cardinality_error': card_err}

    def loss_boxes(self, outputs, targets, indices, num_boxes):
        idx = self._get_src_permutation_idx(indices)
        src_boxes = outputs['pred_boxes'][idx]
        target_boxes = torch.cat([t['boxes'][i] for t, (_, i) in zip(targets, indices)], dim=0)
        loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction='none')
        losses = {'loss_bbox': loss_bbox.sum() / num_boxes}
        loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                                       box_cxcywh_to_xyxy(target_boxes)))
        losses['loss_giou'] = loss_giou.sum() / num_boxes
        return losses

    def _get_src_permutation_idx(self, indices):
        batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
        src_idx = torch.cat([src for (src, _) in indices])
        return batch_idx, src_idx

    def get_loss(self, loss, outputs, targets, indices, num_boxes, **kwargs):
        loss_map = {'labels': self.loss_labels, 'cardinality': self.loss_cardinality, 'boxes': self.loss_boxes}
        return loss_map[loss](outputs, targets, indices, num_boxes, **kwargs)

    def forward(self, outputs, targets):
        outputs_without_aux = {k: v for k, v in outputs.items() if k != 'aux_outputs'}
        indices = self.matcher(outputs_without_aux, targets)
        num_boxes = sum(len(t["labels"]) for t in targets)
        num_boxes = torch.clamp(torch.as_tensor([num_boxes], dtype=torch.float), min=1).item()
        losses = {}
        for loss in self.losses:
            losses.update(self.get_loss(loss, outputs, targets, indices, num_boxes))
        if 'aux_outputs' in outputs:
            for i, aux_outputs in enumerate(outputs['aux_outputs']):
                indices = self.matcher(aux_outputs, targets)
                for loss in self.losses:
                    kwargs = {'log': False} if loss == 'labels' else {}
                    l_dict = self.get_loss(loss, aux_outputs, targets, indices, num_boxes, **kwargs)
                    losses.update({k + f'_{i}': v for k, v in l_dict.items()})
        return losses


# ----------------------------------------------------------------------------- train / eval
def train_one_epoch(model, criterion, data_loader, optimizer, epoch, max_norm=0):
    model.train()
    criterion.train()
    header = 'Epoch: [{}]'.format(epoch)
    totals = {}
    for it, (samples, targets) in enumerate(data_loader):
        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)

        loss_dict_scaled = {k: v * weight_dict[k] for k, v in loss_dict.items() if k in weight_dict}
        loss_value = sum(loss_dict_scaled.values()).item()

        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            print(loss_dict)
            sys.exit(1)

        optimizer.zero_grad()
        losses.backward()
        total_norm = torch.zeros([])
        if max_norm > 0:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()

        for k, v in [('loss', loss_value), ('loss_ce', loss_dict['loss_ce'].item()),
                     ('loss_bbox', loss_dict['loss_bbox'].item()), ('loss_giou', loss_dict['loss_giou'].item()),
                     ('class_error', loss_dict['class_error'].item()),
                     ('cardinality_error', loss_dict['cardinality_error'].item())]:
            totals[k] = totals.get(k, 0.0) + v
        if it % 10 == 0:
            print('{} [{:2d}/{}]  lr: {:.6f}  loss: {:.4f}  loss_ce: {:.4f}  loss_bbox: {:.4f}  '
                  'loss_giou: {:.4f}  class_error: {:.2f}  cardinality_error: {:.2f}  grad_norm: {:.2f}'.format(
                      header, it, len(data_loader), optimizer.param_groups[0]["lr"], loss_value,
                      loss_dict['loss_ce'].item(), loss_dict['loss_bbox'].item(), loss_dict['loss_giou'].item(),
                      loss_dict['class_error'].item(), loss_dict['cardinality_error'].item(), total_norm.item()))
    stats = {k: v / len(data_loader) for k, v in totals.items()}
    print('Averaged stats: ' + '  '.join('{}: {:.4f}'.format(k, v) for k, v in stats.items()))
    return stats


@torch.no_grad()
def evaluate(model, criterion, data_loader):
    """Loss on held-out images, plus detection recall/precision at IoU 0.5 for
    predictions whose object score (1 - p(no-object)) exceeds 0.5."""
    model.eval()
    criterion.eval()
    tot_loss, n_batches, tp, n_gt, n_pred = 0.0, 0, 0, 0, 0
    for samples, targets in data_loader:
        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        tot_loss += sum(loss_dict[k] * criterion.weight_dict[k] for k in loss_dict if k in criterion.weight_dict).item()
        n_batches += 1
        prob = outputs['pred_logits'].softmax(-1)
        scores, labels = prob[..., :-1].max(-1)
        for b, t in enumerate(targets):
            keep = scores[b] > 0.5
            pb = box_cxcywh_to_xyxy(outputs['pred_boxes'][b][keep])
            pl = labels[b][keep]
            gb = box_cxcywh_to_xyxy(t['boxes'])
            n_gt += len(gb)
            n_pred += len(pb)
            if len(pb) == 0:
                continue
            iou, _ = box_iou(pb, gb)
            used = set()
            for p in iou.max(1).values.argsort(descending=True).tolist():
                j = int(iou[p].argmax())
                if iou[p, j] >= 0.5 and pl[p] == t['labels'][j] and j not in used:
                    used.add(j)
                    tp += 1
    return tot_loss / n_batches, tp / max(n_gt, 1), tp / max(n_pred, 1)


def main(args):
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    num_classes = 3

    backbone = Joiner(Backbone(TinyResNet(), train_backbone=args.lr_backbone > 0, num_channels=64),
                      PositionEmbeddingSine(args.hidden_dim // 2, normalize=True))
    transformer = Transformer(args.hidden_dim, args.nheads, args.enc_layers, args.dec_layers,
                              args.dim_feedforward, args.dropout)
    model = DETR(backbone, transformer, num_classes=num_classes, num_queries=args.num_queries,
                 aux_loss=args.aux_loss)
    matcher = HungarianMatcher(cost_class=args.set_cost_class, cost_bbox=args.set_cost_bbox,
                               cost_giou=args.set_cost_giou)
    weight_dict = {'loss_ce': 1, 'loss_bbox': args.bbox_loss_coef, 'loss_giou': args.giou_loss_coef}
    if args.aux_loss:
        aux_weight_dict = {}
        for i in range(args.dec_layers - 1):
            aux_weight_dict.update({k + f'_{i}': v for k, v in weight_dict.items()})
        weight_dict.update(aux_weight_dict)
    criterion = SetCriterion(num_classes, matcher=matcher, weight_dict=weight_dict,
                             eos_coef=args.eos_coef, losses=['labels', 'boxes', 'cardinality'])

    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print('number of params:', n_parameters)

    param_dicts = [
        {"params": [p for n, p in model.named_parameters() if "backbone" not in n and p.requires_grad]},
        {"params": [p for n, p in model.named_parameters() if "backbone" in n and p.requires_grad],
         "lr": args.lr_backbone},
    ]
    optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)

    dataset_train = ShapesDetection(320, seed=1)
    dataset_val = ShapesDetection(96, seed=2)
    data_loader_train = DataLoader(dataset_train, batch_size=args.batch_size, shuffle=True,
                                   drop_last=True, collate_fn=collate_fn)
    data_loader_val = DataLoader(dataset_val, batch_size=32, shuffle=False, collate_fn=collate_fn)

    val_loss, rec, prec = evaluate(model, criterion, data_loader_val)
    print('Test: loss {:.4f}  recall@0.5 {:.3f}  precision@0.5 {:.3f}'.format(val_loss, rec, prec))
    print("Start training")
    start_time = time.time()
    for epoch in range(args.epochs):
        train_one_epoch(model, criterion, data_loader_train, optimizer, epoch, args.clip_max_norm)
        lr_scheduler.step()
        val_loss, rec, prec = evaluate(model, criterion, data_loader_val)
        print('Test: loss {:.4f}  recall@0.5 {:.3f}  precision@0.5 {:.3f}'.format(val_loss, rec, prec))
    print('Training time {:.1f}s'.format(time.time() - start_time))


if __name__ == '__main__':
    main(args)
