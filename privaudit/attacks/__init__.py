"""Membership-inference attacks: pure functions over model outputs (logits)."""

from privaudit.attacks.scores import (
    confidence_scores,
    loss_scores,
    softmax,
    top_k_posteriors,
)
from privaudit.attacks.shadow import ShadowAttack

__all__ = ["ShadowAttack", "confidence_scores", "loss_scores", "softmax", "top_k_posteriors"]
