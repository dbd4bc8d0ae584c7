"""The user's own architectures: ``--model torchvision:NAME`` and ``--model module:MODULE:CALLABLE``.

* ``torchvision:NAME``: ``torchvision.models.get_model(NAME, weights=None,
  num_classes=K, **args)``, freshly initialised (never pretrained weights: the audit is of
  a model trained on the audited data). ``small_stem=true`` gives a ResNet the small-image
  stem of the CIFAR-10 ResNets (first convolution 3×3, stride 1; no max-pooling), so that a
  32×32 image is not reduced to 8×8 before the first block. A dataset with one channel is
  repeated to three for a torchvision model, which expects RGB.
* ``module:MODULE:CALLABLE``: ``MODULE`` imported (the current folder first on the search
  path), ``CALLABLE(**args)`` called, with ``num_classes`` and ``input_shape`` (C, H, W)
  added when its signature takes them (or takes ``**kwargs``); it must return an
  ``nn.Module`` mapping (B, C, H, W) float images to (B, K) logits.

``args`` are the ``--model-arg key=value`` pairs, stored in the config as canonical JSON, so
the config hash covers the factory's name and arguments; the run records the SHA-256 of the
factory module's file (:func:`source_hash`).

Under DP-SGD the model goes through Opacus's ``ModuleValidator``: ``fix`` replaces what
per-sample gradients cannot handle (BatchNorm → GroupNorm, …), and what it changed is
listed in ``model.privaudit_notes`` (the training metrics carry it); a model it cannot fix
is an error naming what is wrong.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import sys
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from privaudit.errors import ConfigError, brief

STEM_ARG = "small_stem"


def parse_args(args: str) -> dict:
    """The model arguments stored in a config (canonical JSON, "" for none)."""
    return json.loads(args) if args else {}


def _factory(name: str):
    kind, _, rest = name.partition(":")
    if kind == "torchvision":
        if not rest:
            raise ConfigError("`model` torchvision:NAME needs a model name, e.g. torchvision:resnet18")
        return rest, None
    module, _, attr = rest.rpartition(":")
    if not module or not attr:
        raise ConfigError(f"`model` {name!r}: expected module:MODULE:CALLABLE, e.g. module:mymodels:make_net")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # importing runs the user's module: any failure of it is one line
        raise ConfigError(f"`model` {name!r}: cannot import {module} ({type(exc).__name__}: {brief(exc)})") from None
    fn = getattr(mod, attr, None)
    if not callable(fn):
        raise ConfigError(f"`model` {name!r}: {module} has no callable {attr!r}")
    return fn, mod


def source_hash(name: str) -> str | None:
    """SHA-256 of the file that defines a ``module:`` factory (None for torchvision models,
    whose version the provenance records, and for a module without a file)."""
    if not name.startswith("module:"):
        return None
    _, mod = _factory(name)
    path = getattr(mod, "__file__", None)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None


class RepeatChannels(nn.Module):
    """(B, 1, H, W) → (B, 3, H, W): grey images fed to a model that expects RGB."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(-1, 3, -1, -1)


def _torchvision(arch: str, input_shape, num_classes: int, args: dict) -> nn.Module:
    import torchvision

    args = dict(args)
    small = bool(args.pop(STEM_ARG, False))
    if arch not in torchvision.models.list_models():
        raise ConfigError(f"`model` torchvision:{arch}: torchvision has no such model (see "
                          "torchvision.models.list_models())")
    try:
        model = torchvision.models.get_model(arch, weights=None, num_classes=num_classes, **args)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"`model` torchvision:{arch}: {brief(exc)}") from None
    if small:
        if not (isinstance(getattr(model, "conv1", None), nn.Conv2d) and hasattr(model, "maxpool")):
            raise ConfigError(f"`model_args` {STEM_ARG}=true is for ResNet-style models (conv1 and maxpool); "
                              f"{arch} has none")
        old = model.conv1
        model.conv1 = nn.Conv2d(old.in_channels, old.out_channels, 3, stride=1, padding=1, bias=old.bias is not None)
        model.maxpool = nn.Identity()
    if input_shape[0] == 1:
        model = nn.Sequential(RepeatChannels(), model)
    elif input_shape[0] != 3:
        raise ConfigError(f"`model` torchvision:{arch} takes RGB or grey images, not {input_shape[0]} channels")
    return model


def _module(name: str, input_shape, num_classes: int, args: dict) -> nn.Module:
    fn, _ = _factory(name)
    kwargs = dict(args)
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(fn).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):
        params, takes_any = {}, False
    for key, value in (("num_classes", num_classes), ("input_shape", tuple(input_shape))):
        if (key in params or takes_any) and key not in kwargs:
            kwargs[key] = value
    try:
        model = fn(**kwargs)
    except Exception as exc:  # the user's factory: any failure of it is one line
        raise ConfigError(f"`model` {name!r}: the factory failed ({type(exc).__name__}: {brief(exc)})") from None
    if not isinstance(model, nn.Module):
        raise ConfigError(f"`model` {name!r}: the factory returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def build_custom(name: str, input_shape: tuple[int, int, int], num_classes: int, args: str = "",
                 dp: bool = False) -> nn.Module:
    """A freshly initialised model of ``name`` (torch's global RNG), checked on one input."""
    parsed = parse_args(args)
    model = (_torchvision(name.partition(":")[2], input_shape, num_classes, parsed) if name.startswith("torchvision:")
             else _module(name, input_shape, num_classes, parsed))
    notes: list[str] = []
    if dp:
        model, notes = _opacus_fix(name, model)
    # torch annotates Module.__setattr__'s value as Tensor | Module, but any attribute may be set
    model.privaudit_notes = notes  # type: ignore[assignment]
    _check_output(name, model, input_shape, num_classes)
    return model


def _opacus_fix(name: str, model: nn.Module) -> tuple[nn.Module, list[str]]:
    """Opacus's ``ModuleValidator.fix``, and what it changed (by module path and type)."""
    from opacus.validators import ModuleValidator

    if not ModuleValidator.validate(model, strict=False):
        return model, []
    before = {n: type(m).__name__ for n, m in model.named_modules()}
    fixed = ModuleValidator.fix(model)
    after = {n: type(m).__name__ for n, m in fixed.named_modules()}
    changed = sorted((n, before[n], after.get(n, "removed")) for n in before if after.get(n) != before[n])
    remaining = ModuleValidator.validate(fixed, strict=False)
    if remaining:
        raise ConfigError(f"`model` {name!r} cannot train under DP-SGD: {' '.join(str(remaining[0]).split())}")
    kinds: dict[tuple[str, str], int] = {}
    for _, old, new in changed:
        kinds[(old, new)] = kinds.get((old, new), 0) + 1
    notes = [f"DP-SGD: {count} {old} → {new} (Opacus ModuleValidator.fix)"
             for (old, new), count in sorted(kinds.items())]
    return fixed, notes


def _check_output(name: str, model: nn.Module, input_shape, num_classes: int) -> None:
    """One forward pass on two zero images (eval mode, no gradient): the logits' shape."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(torch.zeros(2, *input_shape))
    except Exception as exc:  # the user's forward pass: any failure of it is one line
        raise ConfigError(f"`model` {name!r} fails on inputs of shape (B, {', '.join(map(str, input_shape))}): "
                          f"{type(exc).__name__}: {brief(exc)}") from None
    finally:
        model.train(was)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ConfigError(f"`model` {name!r} returns {shape} for 2 images; it must return logits of shape "
                          f"(B, {num_classes})")
