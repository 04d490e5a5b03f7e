"""Shape classifier (disc / square / cross) with Grad-CAM monitoring.

The Grad-CAM helper from pytorch-grad-cam (ActivationsAndGradients) is attached to the last
convolution block so that, after each epoch, the class activation map of a few fixed images
can be checked to see whether the network looks at the shape or at the background.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(4)


def make_shapes(n, size=32):
    yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
    labels = torch.randint(0, 3, (n,))
    cx = torch.randint(8, size - 8, (n, 1, 1))
    cy = torch.randint(8, size - 8, (n, 1, 1))
    r = torch.randint(4, 8, (n, 1, 1))
    dx, dy = (xx - cx).abs(), (yy - cy).abs()
    disc = dx ** 2 + dy ** 2 <= r ** 2
    square = (dx <= r) & (dy <= r)
    cross = ((dx <= 1) & (dy <= r)) | ((dy <= 1) & (dx <= r))
    shape = torch.where(labels.view(-1, 1, 1) == 0, disc, torch.where(labels.view(-1, 1, 1) == 1, square, cross))
    images = 0.3 * torch.rand(n, 1, 1, 1) + 0.2 * torch.randn(n, 3, size, size)
    images = images + shape.unsqueeze(1) * (0.8 + 0.4 * torch.rand(n, 3, 1, 1))
    return images, labels


class ActivationsAndGradients:
    """ Class for extracting activations and
    registering gradients from targetted intermediate layers """

    def __init__(self, model, target_layer):
        self.model = model
        self.gradients = []
        self.activations = []

        target_layer.register_forward_hook(self.save_activation)
        target_layer.register_full_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        activation = output
        self.activations.append(activation.cpu().detach())

    def save_gradient(self, module, grad_input, grad_output):
        # Gradients are computed in reverse order
        grad = grad_output[0]
        self.gradients = [grad.cpu().detach()] + self.gradients

    def __call__(self, x):
        self.gradients = []
        self.activations = []
        return self.model(x)


class ShapeNet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU()),
        )
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


def grad_cam(cam_extractor, images, target_class):
    cam_extractor.model.zero_grad()
    out = cam_extractor.model(images)
    out[:, target_class].sum().backward()
    acts, grads = cam_extractor.activations[-1], cam_extractor.gradients[0]
    weights = grads.mean(dim=(2, 3), keepdim=True)
    cam = F.relu((weights * acts).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=images.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    return cam / (cam.amax(dim=(1, 2), keepdim=True) + 1e-8)


if __name__ == "__main__":
    images, labels = make_shapes(1280)
    loader = DataLoader(TensorDataset(images, labels), batch_size=32, shuffle=True)
    probe_images, probe_labels = make_shapes(8)

    model = ShapeNet()
    cam_extractor = ActivationsAndGradients(model, target_layer=model.features[-1])
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(2):
        model.train()
        correct, seen = 0, 0
        for step, (x, y) in enumerate(loader):
            logits = model(x)
            loss = criterion(logits, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            correct += (logits.argmax(1) == y).sum().item()
            seen += len(y)
            if step % 10 == 0:
                print(f"epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f} acc {correct / seen:.3f}")

        model.eval()
        cam = grad_cam(cam_extractor, probe_images, target_class=0)
        on_shape = (cam * (probe_images.mean(1) > 0.6)).sum() / cam.sum()
        print(f"epoch {epoch}: train acc {correct / seen:.3f}, CAM mass on the shape {on_shape:.2f}")
