"""Reading a model's weights written by another program, without running any of its code.

* ``.safetensors``: parsed here (an 8-byte little-endian header length, a JSON header of
  ``name → {dtype, shape, data_offsets}``, then the raw tensors), so no extra package is
  needed and nothing is executed;
* anything else (``.pt``, ``.pth``, ``.bin``, …): ``torch.load(weights_only=True)``, whose
  unpickler builds tensors and plain containers only. A file that needs a full pickle (a
  whole pickled model, or objects with code) is refused with one line, never loaded.

Either gives a state dict (``name → tensor``); ``{"state_dict": …}`` and ``{"model": …}``
wrappers (what training scripts and Lightning checkpoints save) are unwrapped, and the
``module.`` prefix of ``DataParallel`` models is removed.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

import numpy as np
import torch
from torch import nn

from privaudit.errors import DataError, brief

SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
                      "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER = 100 << 20


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file (BF16 included), each checked against the file."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise DataError(f"{path}: not a safetensors file (too short)")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > min(MAX_HEADER, len(raw) - 8):
        raise DataError(f"{path}: not a safetensors file (header length {n})")
    try:
        header = json.loads(raw[8:8 + n])
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path}: not a safetensors file (header: {exc})") from None
    if not isinstance(header, dict):
        raise DataError(f"{path}: not a safetensors file (header is not a table)")
    body = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (start, end) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise DataError(f"{path}: tensor {name!r} has a malformed header entry") from None
        count = int(np.prod(shape, dtype=np.int64))
        np_dtype: type[np.generic]
        if dtype == "BF16":
            width, np_dtype = 2, np.uint16
        elif dtype in SAFETENSORS_DTYPES:
            np_dtype = SAFETENSORS_DTYPES[dtype]
            width = np.dtype(np_dtype).itemsize
        else:
            raise DataError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
        if not (0 <= start <= end <= len(body)) or end - start != count * width:
            raise DataError(f"{path}: tensor {name!r} does not fit its byte range")
        a = np.frombuffer(body[start:end], dtype=np_dtype).reshape(shape).copy()
        t = torch.from_numpy(a)
        out[name] = t.view(torch.bfloat16) if dtype == "BF16" else t
    return out


#: where torch's refusal of a pickle says what it met (its message's first lines are advice to
#: load the file anyway, which privaudit does not give)
UNPICKLER_SAYS = "WeightsUnpickler error:"


def _unpickler_refusal(exc: Exception) -> str:
    """What torch's ``weights_only`` loader met in the file, in its own first sentence
    (``Unsupported global: GLOBAL __main__.Net was not an allowed global by default``), or
    :func:`~privaudit.errors.brief` of the whole message when it has no such part."""
    text = brief(exc, 10_000)
    if UNPICKLER_SAYS not in text:
        return brief(exc, 200)
    said = text.split(UNPICKLER_SAYS, 1)[1].strip()
    return said.split(". ", 1)[0].rstrip(".")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The state dict in ``path`` (module docstring), or one :class:`DataError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"weights file {path} does not exist")
    state: object
    if path.suffix == ".safetensors":
        state = read_safetensors(path)
    else:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise DataError(f"weights file {path} needs a full pickle to load (it holds objects or code beyond "
                            f"tensors: {_unpickler_refusal(exc)}); refused: save model.state_dict() with torch.save, "
                            "or as safetensors") from None
        except (RuntimeError, OSError, EOFError, ValueError) as exc:
            raise DataError(f"weights file {path} is not a readable PyTorch or safetensors file "
                            f"({brief(exc, 200)})") from None
    for key in ("state_dict", "model", "model_state_dict"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state = state[key]
            break
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise DataError(f"weights file {path} holds no state dict (a mapping of parameter names to tensors)")
    if all(k.startswith("module.") for k in state):
        state = {k[len("module."):]: v for k, v in state.items()}
    return state


def load_into(model: nn.Module, state: dict[str, torch.Tensor], path: str | Path) -> nn.Module:
    """``model`` with ``state`` loaded strictly (every name and shape must match), in fp32.

    A model wrapped by privaudit (grey images repeated for a torchvision model:
    ``Sequential(RepeatChannels, model)``) also takes the state dict of the bare model."""
    own = model.state_dict()
    if set(state) != set(own) and all(k.startswith("1.") for k in own) and {f"1.{k}" for k in state} == set(own):
        state = {f"1.{k}": v for k, v in state.items()}
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        parts = ([f"missing {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}"] if missing else []) + \
                ([f"unexpected {', '.join(unexpected[:3])}{' …' if len(unexpected) > 3 else ''}"] if unexpected else [])
        raise DataError(f"weights file {path} does not fit the architecture: {'; '.join(parts)}")
    for k, v in state.items():
        if tuple(v.shape) != tuple(own[k].shape):
            raise DataError(f"weights file {path}: {k} has shape {tuple(v.shape)}, the architecture's is "
                            f"{tuple(own[k].shape)}")
    model.load_state_dict({k: v.to(own[k].dtype) for k, v in state.items()}, strict=True)
    return model
