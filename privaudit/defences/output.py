"""Output-side defences: the model trains as it is; a query returns less.

* ``top-k`` (knob k): the k largest softmax scores, the others zeroed, *not* renormalised
  (what an API that returns its top k scores gives);
* ``rounding`` (knob d): every softmax score rounded to d decimals, not renormalised;
* ``label-only``: the predicted label alone, as a one-hot vector.

The scores released are exact (no renormalisation, no tie-breaking); the predicted label
an API returns beside them is the model's own, so test accuracy is the model's. Every attack reads the released
scores (:func:`privaudit.defences.base.released_logits`: zeroed scores become log 1e-30);
score attacks then see little, and the label-only attacks are the ones that can tell
(Choquette-Choo et al., *Label-Only Membership Inference Attacks*, ICML 2021, arXiv
2007.14321)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import OUTPUT, Defence, Knob, released_logits

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch


class TopK(Defence):
    name = "top-k"
    tag = "top"
    title = "top-k scores"
    side = OUTPUT
    knob = Knob("k", "k", 1, 1000, grid=(3.0, 1.0), integer=True, stronger="lower")
    paper = ("output truncation (Shokri et al., Membership Inference Attacks against Machine Learning Models, "
             "arXiv 1610.05820)")
    formula = "release the k largest softmax scores, zero the rest"

    def release(self, logits: torch.Tensor, value: float) -> torch.Tensor:
        import torch

        p = torch.softmax(logits.double(), dim=-1)
        k = min(int(value), p.shape[-1])
        kept = torch.zeros_like(p).scatter(-1, p.topk(k, dim=-1).indices, 1.0)
        return released_logits(p * kept).to(logits.dtype)


class Rounding(Defence):
    name = "rounding"
    tag = "rd"
    title = "rounded scores"
    side = OUTPUT
    knob = Knob("decimals", "d", 0, 12, grid=(3.0, 2.0, 1.0), integer=True, stronger="lower")
    paper = ("output rounding (Shokri et al., Membership Inference Attacks against Machine Learning Models, "
             "arXiv 1610.05820)")
    formula = "release each softmax score rounded to d decimals"

    def release(self, logits: torch.Tensor, value: float) -> torch.Tensor:
        import torch

        p = torch.softmax(logits.double(), dim=-1)
        scale = 10.0 ** int(value)
        return released_logits(torch.round(p * scale) / scale).to(logits.dtype)


class LabelOnly(Defence):
    name = "label-only"
    tag = "lbl"
    title = "label only"
    side = OUTPUT
    knob = None
    paper = "Choquette-Choo et al., Label-Only Membership Inference Attacks (ICML 2021, arXiv 2007.14321)"
    formula = "release argmax z alone (one-hot)"

    def release(self, logits: torch.Tensor, value: float) -> torch.Tensor:
        import torch

        onehot = torch.zeros_like(logits, dtype=torch.float64).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
        return released_logits(onehot).to(logits.dtype)


TOP_K = TopK()
ROUNDING = Rounding()
LABEL_ONLY = LabelOnly()
