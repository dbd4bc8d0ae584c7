"""The three architectures of the MG-noise paper (docs/methods.md A.3).

Input shapes follow the dataset: (3, 32, 32) for CIFAR-10, (1, 8, 8) for digits. All
convolutions keep the spatial size (padding), and each max-pool halves it, so both datasets
fit every architecture.
"""

from __future__ import annotations

from torch import nn

from privaudit.errors import ConfigError


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int, *,
                width: int = 512, dp: bool = False) -> nn.Module:
    """Build a freshly initialised model (initialisation uses torch's global RNG).

    mlp: flatten -> Linear(C*H*W, width) -> ReLU -> Linear(width, classes).
    cnn: the ML-Leaks standard CNN, conv5x5x32 -> ReLU -> pool -> conv5x5x32 -> ReLU ->
        pool -> dense 128 (tanh) -> dense classes.
    cnn-improved: two conv3x3 blocks of 32 and 64 filters with normalisation, pooling and
        dropout 0.2 / 0.3, then dense 128 -> ReLU -> dropout 0.5 -> dense classes. Under
        DP-SGD (``dp=True``) BatchNorm, which mixes samples, becomes GroupNorm.
    convex-relu: :class:`privaudit.models.convex_relu.ConvexReLU` with ``width`` gate vectors.
    """
    c, h, w = input_shape
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, width), nn.ReLU(), nn.Linear(width, num_classes))
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * (h // 4) * (w // 4), 128), nn.Tanh(),
            nn.Linear(128, num_classes),
        )
    if name == "cnn-improved":
        def norm(ch: int) -> nn.Module:
            return nn.GroupNorm(min(8, ch), ch) if dp else nn.BatchNorm2d(ch)

        def block(cin: int, cout: int, drop: float) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, padding=1), norm(cout), nn.ReLU(),
                    nn.Conv2d(cout, cout, 3, padding=1), norm(cout), nn.ReLU(),
                    nn.MaxPool2d(2), nn.Dropout(drop)]

        return nn.Sequential(
            *block(c, 32, 0.2), *block(32, 64, 0.3),
            nn.Flatten(), nn.Linear(64 * (h // 4) * (w // 4), 128), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(128, num_classes),
        )
    if name == "convex-relu":
        from privaudit.models.convex_relu import ConvexReLU

        return ConvexReLU(c * h * w, num_classes, gates=width)
    raise ConfigError(f"unknown model {name!r}; expected mlp, cnn, cnn-improved or convex-relu")
