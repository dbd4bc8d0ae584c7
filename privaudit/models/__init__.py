"""Target architectures: ``mlp``, ``cnn`` (ML-Leaks) and ``cnn-improved`` (docs/methods/a-mg-noise.md A.3)."""

from privaudit.models.architectures import build_model

__all__ = ["build_model"]
