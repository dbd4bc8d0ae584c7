"""The architectures of the MG-noise paper (docs/methods/a-mg-noise.md A.3), in the shapes its authors'
code gives them.

Input shapes follow the dataset: (3, 32, 32) for CIFAR-10, (1, 8, 8) for digits. The
Standard CNN's second convolution has no padding (5x5 on 16x16 leaves 12x12, and the
flatten holds 32 * 6 * 6 = 1,152 values on CIFAR-10); on inputs too small for it (the 8x8
digits, where 4x4 would leave nothing) it is padded to keep its size, a documented
deviation. The improved CNNs keep their size in every convolution (padding 1).
"""

from __future__ import annotations

from torch import nn

from privaudit.core.defaults import DEFAULT_WIDTHS
from privaudit.errors import ConfigError


def _conv_out(size: int, kernel: int, padding: int) -> int:
    return size + 2 * padding - kernel + 1


def _act(activation: nn.Module, dropout: float) -> nn.Module:
    """The hidden activation, followed by dropout in the same slot when p > 0."""
    return nn.Sequential(activation, nn.Dropout(dropout)) if dropout > 0 else activation


def build_model(name: str, input_shape: tuple[int, int, int], num_classes: int, *,
                width: int = 512, dp: bool = False, args: str = "", dropout: float = 0.0) -> nn.Module:
    """Build a freshly initialised model (initialisation uses torch's global RNG).

    ``width`` is the hidden units of the dense layer (the config's default is
    :data:`privaudit.core.defaults.DEFAULT_WIDTHS`).

    mlp: flatten -> Linear(C*H*W, width) -> ReLU -> Linear(width, classes).
    cnn: the ML-Leaks "Standard CNN": conv5x5x32 (padding 2) -> ReLU -> pool ->
        conv5x5x32 (no padding) -> ReLU -> pool -> dense ``width`` (tanh) -> dense classes.
    cnn-improved: the "Improved CNN" of the attack and DP-SGD sweeps (Figures 9-10): three
        blocks [conv3x3, norm, ReLU] x 2 -> maxpool -> dropout of 32, 64 and 128 filters
        (dropout 0.2, 0.3, 0.4), then dense ``width`` -> ReLU -> dropout 0.5 -> dense classes.
    cnn-improved-small: the two-block Improved CNN of the Figure 4 accuracy sweep (32 and 64
        filters, dense ``width``). Under DP-SGD (``dp=True``) BatchNorm, which mixes
        samples, becomes GroupNorm (min(8, channels) groups), as Opacus's
        ``ModuleValidator.fix`` does.
    convex-relu: :class:`privaudit.models.convex_relu.ConvexReLU` with ``width`` gate vectors.

    ``dropout`` p > 0 (the dropout defence, ``mlp`` and ``cnn``): dropout after the hidden
    activation, held in one slot with it (``Sequential(ReLU, Dropout)``), so that the layers
    keep their indices and the saved weights load into the model built without it (dropout
    has no weights and is the identity at evaluation).
    torchvision:NAME, module:MODULE:CALLABLE: the user's own, built with ``args``
        (:func:`privaudit.models.custom.build_custom`).
    """
    if name.startswith(("torchvision:", "module:")):
        from privaudit.models.custom import build_custom

        return build_custom(name, input_shape, num_classes, args, dp=dp)
    c, h, w = input_shape
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, width), _act(nn.ReLU(), dropout),
                             nn.Linear(width, num_classes))
    if name == "cnn":
        pad2 = 0 if min(_conv_out(h // 2, 5, 0), _conv_out(w // 2, 5, 0)) >= 2 else 2
        h2, w2 = _conv_out(h // 2, 5, pad2) // 2, _conv_out(w // 2, 5, pad2) // 2
        return nn.Sequential(
            nn.Conv2d(c, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 5, padding=pad2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * h2 * w2, width), _act(nn.Tanh(), dropout),
            nn.Linear(width, num_classes),
        )
    if name in ("cnn-improved", "cnn-improved-small"):
        def norm(ch: int) -> nn.Module:
            return nn.GroupNorm(min(8, ch), ch) if dp else nn.BatchNorm2d(ch)

        def block(cin: int, cout: int, drop: float) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, padding=1), norm(cout), nn.ReLU(),
                    nn.Conv2d(cout, cout, 3, padding=1), norm(cout), nn.ReLU(),
                    nn.MaxPool2d(2), nn.Dropout(drop)]

        filters = [(c, 32, 0.2), (32, 64, 0.3)] + ([(64, 128, 0.4)] if name == "cnn-improved" else [])
        scale = 2 ** len(filters)
        return nn.Sequential(
            *(layer for spec in filters for layer in block(*spec)),
            nn.Flatten(), nn.Linear(filters[-1][1] * (h // scale) * (w // scale), width), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(width, num_classes),
        )
    if name == "convex-relu":
        from privaudit.models.convex_relu import ConvexReLU

        return ConvexReLU(c * h * w, num_classes, gates=width)
    raise ConfigError(f"unknown model {name!r}; expected one of {', '.join(DEFAULT_WIDTHS)}")
