"""Knowledge distillation of a small MLP student from a larger teacher on an
unlabelled transfer set, with a distiller-style KD policy (hook on the student's
output, soft-target KL loss added before backward)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)

IN_DIM, N_CLASSES = 20, 8


class Teacher(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN_DIM, 256), nn.Tanh(), nn.Linear(256, 256),
                                 nn.Tanh(), nn.Linear(256, N_CLASSES))

    def forward(self, x):
        return 3.0 * self.net(x)


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN_DIM, 64)
        self.fc2 = nn.Linear(64, N_CLASSES)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class KnowledgeDistillationPolicy:
    def __init__(self, student, teacher, temperature, student_loss_weight, distill_loss_weight):
        self.student = student
        self.teacher = teacher
        self.temperature = temperature
        self.student_loss_weight = student_loss_weight
        self.distill_loss_weight = distill_loss_weight
        self.last_students_logits = None
        self.last_teacher_logits = None
        self.student.register_forward_hook(self._store_student_logits)

    def _store_student_logits(self, module, inputs, out):
        self.last_students_logits = out.new_tensor(out, requires_grad=True)

    def forward(self, x):
        with torch.no_grad():
            self.last_teacher_logits = self.teacher(x)
        return self.student(x)

    def before_backward_pass(self, loss):
        T = self.temperature
        soft_log_probs = F.log_softmax(self.last_students_logits / T, dim=1)
        soft_targets = F.softmax(self.last_teacher_logits / T, dim=1)
        distillation_loss = F.kl_div(soft_log_probs, soft_targets, reduction="batchmean") * T * T
        return self.student_loss_weight * loss + self.distill_loss_weight * distillation_loss


def main():
    teacher = Teacher()
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)

    # unlabelled transfer set: the "labels" are placeholders, the student learns from the teacher only
    x = torch.randn(4096, IN_DIM)
    dummy = torch.zeros(4096, dtype=torch.long)
    loader = DataLoader(TensorDataset(x, dummy), batch_size=128, shuffle=True)

    student = Student()
    kd = KnowledgeDistillationPolicy(student, teacher, temperature=2.0,
                                     student_loss_weight=0.0, distill_loss_weight=1.0)
    optimizer = torch.optim.Adam(student.parameters(), lr=3e-3)

    x_val = torch.randn(1024, IN_DIM)
    with torch.no_grad():
        val_targets = teacher(x_val).argmax(1)

    for epoch in range(6):
        student.train()
        total, n = 0.0, 0
        for xb, yb in loader:
            out = kd.forward(xb)
            loss = F.cross_entropy(out, yb)
            loss = kd.before_backward_pass(loss)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            n += 1
        student.eval()
        with torch.no_grad():
            agree = (student(x_val).argmax(1) == val_targets).float().mean().item()
        print(f"epoch {epoch}  kd loss {total / n:.4f}  agreement with teacher {agree:.3f}")


if __name__ == "__main__":
    main()
