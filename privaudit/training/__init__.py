"""Training target and shadow models with their defence (MG noise, DP-SGD)."""

from privaudit.training.results import TrainResult, resolve_device
from privaudit.training.trainer import train_model

__all__ = ["TrainResult", "resolve_device", "train_model"]
