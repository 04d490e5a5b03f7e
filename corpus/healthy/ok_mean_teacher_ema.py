"""Semi-supervised classification with a Mean Teacher (EMA teacher).

The student is trained on a few labelled points with cross-entropy plus a
consistency cost towards the teacher's predictions on noisy unlabelled points.
The teacher is a copy of the student whose weights are an exponential moving
average of the student's; it gets no gradients on purpose (its parameters are
detached and its predictions are computed under torch.no_grad()), and only the
student is given to the optimizer.
"""
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 4
DIM = 10
N_LABELED = 40
N_UNLABELED = 4000
STEPS = 600
LR = 1e-3
EMA_DECAY = 0.99
CONSISTENCY = 3.0
RAMPUP_STEPS = 200
INPUT_NOISE = 0.3


def make_data(seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(NUM_CLASSES, DIM, generator=g) * 0.7

    def draw(n):
        y = torch.randint(0, NUM_CLASSES, (n,), generator=g)
        return centers[y] + torch.randn(n, DIM, generator=g), y

    return draw(N_LABELED), draw(N_UNLABELED), draw(2000)


def create_model(ema=False):
    model = nn.Sequential(
        nn.Linear(DIM, 64), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2),
        nn.Linear(64, NUM_CLASSES),
    )
    if ema:
        for param in model.parameters():
            param.detach_()
    return model


def sigmoid_rampup(current, rampup_length):
    """Exponential ramp-up from the Mean Teacher paper."""
    current = np.clip(current, 0.0, rampup_length)
    phase = 1.0 - current / rampup_length
    return float(np.exp(-5.0 * phase * phase))


def update_ema_variables(model, ema_model, alpha, global_step):
    # use the true average until the exponential average is more correct
    alpha = min(1 - 1 / (global_step + 1), alpha)
    for ema_param, param in zip(ema_model.parameters(), model.parameters()):
        ema_param.data.mul_(alpha).add_(param.data, alpha=1 - alpha)


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    acc = (model(x).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def main():
    torch.manual_seed(0)
    (x_lab, y_lab), (x_unl, _), (x_test, y_test) = make_data()

    model = create_model()
    ema_model = create_model(ema=True)
    ema_model.load_state_dict(model.state_dict())
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)

    running = {"loss": 0.0, "class": 0.0, "cons": 0.0}
    for step in range(1, STEPS + 1):
        li = torch.randint(0, N_LABELED, (32,))
        ui = torch.randint(0, N_UNLABELED, (128,))
        xl, yl, xu = x_lab[li], y_lab[li], x_unl[ui]

        student_input = xu + INPUT_NOISE * torch.randn_like(xu)
        teacher_input = xu + INPUT_NOISE * torch.randn_like(xu)

        class_loss = F.cross_entropy(model(xl), yl)
        student_probs = F.softmax(model(student_input), dim=1)
        with torch.no_grad():
            teacher_probs = F.softmax(ema_model(teacher_input), dim=1)
        consistency_weight = CONSISTENCY * sigmoid_rampup(step, RAMPUP_STEPS)
        consistency_loss = F.mse_loss(student_probs, teacher_probs)
        loss = class_loss + consistency_weight * consistency_loss

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        update_ema_variables(model, ema_model, EMA_DECAY, step)

        running["loss"] += loss.item()
        running["class"] += class_loss.item()
        running["cons"] += consistency_loss.item()
        if step % 50 == 0:
            r = {k: v / 50 for k, v in running.items()}
            running = dict.fromkeys(running, 0.0)
            print(f"step {step:4d} | loss {r['loss']:.4f} | class {r['class']:.4f} | "
                  f"cons {r['cons']:.5f} (w={consistency_weight:.2f}) | "
                  f"test acc student {accuracy(model, x_test, y_test):.3f} "
                  f"teacher {accuracy(ema_model, x_test, y_test):.3f}")


if __name__ == "__main__":
    main()
