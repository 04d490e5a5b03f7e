"""TinyNeRF: fit a radiance field to posed images of a scene and render a held-out view.

The scene is a coloured ball rendered from cameras on a ring (12x12 images); the model is the
'very tiny' 3-layer NeRF MLP on positionally-encoded points, volume-rendered along each ray.
"""
from typing import Optional

import numpy as np
import torch

torch.manual_seed(9458)
np.random.seed(9458)


def get_ray_bundle(height: int, width: int, focal_length: float, tform_cam2world: torch.Tensor):
    ii, jj = torch.meshgrid(
        torch.arange(width).to(tform_cam2world),
        torch.arange(height).to(tform_cam2world),
        indexing="xy",
    )
    directions = torch.stack(
        [(ii - width * 0.5) / focal_length, -(jj - height * 0.5) / focal_length, -torch.ones_like(ii)],
        dim=-1,
    )
    ray_directions = torch.sum(directions[..., None, :] * tform_cam2world[:3, :3], dim=-1)
    ray_origins = tform_cam2world[:3, -1].expand(ray_directions.shape)
    return ray_origins, ray_directions


def cumprod_exclusive(tensor: torch.Tensor) -> torch.Tensor:
    cumprod = torch.cumprod(tensor, dim=-1)
    cumprod = torch.roll(cumprod, 1, -1)
    cumprod[..., 0] = 1.0
    return cumprod


def positional_encoding(tensor, num_encoding_functions=6, include_input=True, log_sampling=True):
    encoding = [tensor] if include_input else []
    if log_sampling:
        frequency_bands = 2.0 ** torch.linspace(0.0, num_encoding_functions - 1, num_encoding_functions)
    else:
        frequency_bands = torch.linspace(2.0 ** 0.0, 2.0 ** (num_encoding_functions - 1), num_encoding_functions)
    for freq in frequency_bands:
        for func in [torch.sin, torch.cos]:
            encoding.append(func(tensor * freq))
    if len(encoding) == 1:
        return encoding[0]
    return torch.cat(encoding, dim=-1)


def get_minibatches(inputs: torch.Tensor, chunksize: Optional[int] = 1024 * 8):
    return [inputs[i:i + chunksize] for i in range(0, inputs.shape[0], chunksize)]


def compute_query_points_from_rays(ray_origins, ray_directions, near_thresh, far_thresh, num_samples, randomize=True):
    depth_values = torch.linspace(near_thresh, far_thresh, num_samples).to(ray_origins)
    if randomize is True:
        noise_shape = list(ray_origins.shape[:-1]) + [num_samples]
        depth_values = depth_values + torch.rand(noise_shape).to(ray_origins) * (far_thresh - near_thresh) / num_samples
    query_points = ray_origins[..., None, :] + ray_directions[..., None, :] * depth_values[..., :, None]
    return query_points, depth_values


def render_volume_density(radiance_field, ray_origins, depth_values):
    sigma_a = torch.nn.functional.relu(radiance_field[..., 3])
    rgb = torch.sigmoid(radiance_field[..., :3])
    one_e_10 = torch.tensor([1e10], dtype=ray_origins.dtype, device=ray_origins.device)
    dists = torch.cat(
        (depth_values[..., 1:] - depth_values[..., :-1], one_e_10.expand(depth_values[..., :1].shape)),
        dim=-1,
    )
    alpha = 1.0 - torch.exp(-sigma_a * dists)
    weights = alpha * cumprod_exclusive(1.0 - alpha + 1e-10)
    rgb_map = (weights[..., None] * rgb).sum(dim=-2)
    depth_map = (weights * depth_values).sum(dim=-1)
    acc_map = weights.sum(-1)
    return rgb_map, depth_map, acc_map


def run_one_iter_of_tinynerf(height, width, focal_length, tform_cam2world, near_thresh, far_thresh,
                             depth_samples_per_ray, encoding_function, get_minibatches_function,
                             chunksize, model, encoding_function_args):
    ray_origins, ray_directions = get_ray_bundle(height, width, focal_length, tform_cam2world)
    query_points, depth_values = compute_query_points_from_rays(
        ray_origins, ray_directions, near_thresh, far_thresh, depth_samples_per_ray
    )
    flattened_query_points = query_points.reshape((-1, 3))
    encoded_points = encoding_function(flattened_query_points, encoding_function_args)
    batches = get_minibatches_function(encoded_points, chunksize=chunksize)
    predictions = []
    for batch in batches:
        predictions.append(model(batch))
    radiance_field_flattened = torch.cat(predictions, dim=0)
    unflattened_shape = list(query_points.shape[:-1]) + [4]
    radiance_field = torch.reshape(radiance_field_flattened, unflattened_shape)
    rgb_predicted, _, _ = render_volume_density(radiance_field, ray_origins, depth_values)
    return rgb_predicted


class VeryTinyNerfModel(torch.nn.Module):
    def __init__(self, filter_size=128, num_encoding_functions=6):
        super(VeryTinyNerfModel, self).__init__()
        self.layer1 = torch.nn.Linear(3 + 3 * 2 * num_encoding_functions, filter_size)
        self.layer2 = torch.nn.Linear(filter_size, filter_size)
        self.layer3 = torch.nn.Linear(filter_size, 4)
        self.relu = torch.nn.functional.relu

    def forward(self, x):
        x = self.relu(self.layer1(x))
        x = self.relu(self.layer2(x))
        x = self.layer3(x)
        return x


def look_at_pose(theta, phi, radius=4.0):
    cam = torch.tensor([radius * np.cos(phi) * np.sin(theta), radius * np.sin(phi),
                        radius * np.cos(phi) * np.cos(theta)], dtype=torch.float32)
    forward = -cam / cam.norm()
    up = torch.tensor([0.0, 1.0, 0.0])
    right = torch.linalg.cross(forward, up)
    right = right / right.norm()
    true_up = torch.linalg.cross(right, forward)
    pose = torch.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = right, true_up, -forward, cam
    return pose


def scene_field(points):
    r = points.norm(dim=-1, keepdim=True)
    sigma = 30.0 * torch.sigmoid((1.0 - r) * 20.0)
    color = torch.cat([0.5 + 0.5 * torch.tanh(2 * points[..., :1]),
                       0.5 + 0.5 * torch.tanh(2 * points[..., 1:2]),
                       0.5 - 0.4 * torch.tanh(2 * points[..., 2:3])], dim=-1).clamp(0.02, 0.98)
    return torch.cat([torch.logit(color), sigma], dim=-1)


def render_ground_truth(height, width, focal, pose, near, far, n=128):
    ray_origins, ray_directions = get_ray_bundle(height, width, focal, pose)
    pts, depth = compute_query_points_from_rays(ray_origins, ray_directions, near, far, n, randomize=False)
    rgb, _, _ = render_volume_density(scene_field(pts), ray_origins, depth)
    return rgb


def main():
    height = width = 12
    focal_length = torch.tensor(15.0)
    near_thresh, far_thresh = 2.0, 6.0

    poses = [look_at_pose(t, 0.3 * np.sin(3 * t)) for t in np.linspace(0, 2 * np.pi, 25)[:-1]]
    tform_cam2world = torch.stack(poses)
    with torch.no_grad():
        images = torch.stack([render_ground_truth(height, width, focal_length, p, near_thresh, far_thresh)
                              for p in tform_cam2world])
        testpose = look_at_pose(0.13, 0.2)
        testimg = render_ground_truth(height, width, focal_length, testpose, near_thresh, far_thresh)

    num_encoding_functions = 6
    encode = positional_encoding
    depth_samples_per_ray = 24
    chunksize = 4096
    lr = 5e-3
    num_iters = 200
    display_every = 25

    model = VeryTinyNerfModel(filter_size=64, num_encoding_functions=num_encoding_functions)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    psnrs, iternums = [], []
    for i in range(num_iters):
        target_img_idx = np.random.randint(images.shape[0])
        target_img = images[target_img_idx]
        target_tform_cam2world = tform_cam2world[target_img_idx]

        rgb_predicted = run_one_iter_of_tinynerf(
            height, width, focal_length, target_tform_cam2world, near_thresh, far_thresh,
            depth_samples_per_ray, encode, get_minibatches, chunksize, model, num_encoding_functions,
        )
        loss = torch.nn.functional.mse_loss(rgb_predicted, target_img)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        if i % display_every == 0 or i == num_iters - 1:
            with torch.no_grad():
                rgb_predicted = run_one_iter_of_tinynerf(
                    height, width, focal_length, testpose, near_thresh, far_thresh,
                    depth_samples_per_ray, encode, get_minibatches, chunksize, model, num_encoding_functions,
                )
                test_loss = torch.nn.functional.mse_loss(rgb_predicted, testimg)
            psnr = -10.0 * torch.log10(test_loss)
            psnrs.append(psnr.item())
            iternums.append(i)
            print(f"iter {i:4d}  train loss {loss.item():.5f}  held-out loss {test_loss.item():.5f}  PSNR {psnr.item():.2f}")

    print("Done!")


if __name__ == "__main__":
    main()
