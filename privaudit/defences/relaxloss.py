"""RelaxLoss, knob α: the members are trained to a mean cross-entropy of α instead of to zero
(Chen, Yu and Fritz, *RelaxLoss: Defending Membership Inference Attacks without Losing
Utility*, ICLR 2022, arXiv 2207.05801). A model whose training loss sits at α has member losses
that look like non-member losses, which is what the loss-threshold attacks and their
descendants read; a higher α protects more (and costs confidence: at α the typical member's
true-class probability is about e^−α).

The paper's Algorithm 1, per batch of B members with labels y and the batch's mean
cross-entropy L = (1/B) Σ CE(z_i, y_i):

* L ≥ α: **gradient descent** on L (the plain step);
* L < α, on alternating epochs:

  - **gradient ascent**: the objective is −L, so the step raises the loss back towards α;
  - **posterior flattening**: soft targets t_i built from the model's own prediction
    p_i = softmax(z_i): for a correctly classified member (argmax p_i = y_i) the true class
    keeps its probability, t_i[y_i] = p_i[y_i], and every other class gets the same share
    of the rest, t_i[c] = (1 − p_i[y_i])/(K − 1); a misclassified member keeps its one-hot
    label. The step descends on the cross-entropy against t, (1/B) Σ CE(z_i, t_i), which
    leaves the true-class probability where it is and flattens the non-true classes (the
    largest wrong score comes down, so the margin of the predicted label grows without
    the member's loss falling).

What this module fixes where the algorithm leaves a choice (each checked against the
authors' code, github.com/DingfanChen/RelaxLoss, ``source/*/defense/relaxloss.py``):

* **which epochs ascend**: the trainer counts epochs from 0; epochs 0, 2, 4, … ascend and
  epochs 1, 3, 5, … flatten, as in the authors' code (``epoch % 2 == 0`` ascends, with
  epochs counted from 0 there too). A run of one epoch therefore never flattens;
* **the comparison**: L ≥ α descends (at L = α exactly the plain step is taken). The
  authors' code writes its ascending epochs as ``|L − α|``, which descends above α and
  ascends below it, the same steps;
* **detached soft targets**: t is computed from the logits with the gradient stopped, so
  the flattening step moves the prediction towards a fixed target instead of also moving
  the target (the authors' non-image code lets the gradient flow through t; their CIFAR
  code uses a different combination, ``(1 − correct)·CE(z, t) − CE(z, y)``; this module
  follows the algorithm as the paper states it);
* **no upper clamp**: the authors' code clamps t[y] to ``upper``, which their configs set
  to 1 (a no-op); there is none here;
* **one decision a batch, no host sync**: the branch is chosen on the device
  (``torch.where`` over the 0-d loss), so a step never waits for the loss to be read
  back; the gradient flows through the chosen branch only;
* **what is reported**: the batch's mean cross-entropy against the labels, L, in every
  branch (the loss history then shows the loss held near α).

The objective is written for K models at once (:meth:`RelaxLoss.objective`,
:mod:`privaudit.defences.terms`), each with its own α and its own decision; it works on the
labels (the members' targets are the labels) in float32 whatever the autocast precision of the
logits.

α is meant to lie below log K, the loss of the uniform prediction (K classes; the authors use
α = 1 for CIFAR-10 and α = 3 for CIFAR-100): with α ≥ log K the loop holds the model near
chance, since ascending past the uniform prediction makes members misclassified and the
flattening epochs then pull their one-hot labels back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob, knobs

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

DESCEND, ASCEND, FLATTEN = "descend", "ascend", "flatten"


def flattened_targets(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Posterior flattening's soft targets (…, K), detached: for a correctly classified
    row t[y] = p_y and t[c] = (1 − p_y)/(K − 1) for every other class c, with
    p = softmax(logits); a misclassified row keeps its one-hot label."""
    import torch
    import torch.nn.functional as F

    with torch.no_grad():
        z = logits.detach().float()
        k = z.shape[-1]
        p = torch.softmax(z, dim=-1)
        onehot = F.one_hot(y, k).to(p.dtype)
        p_true = p.gather(-1, y.unsqueeze(-1))                      # (…, 1)
        rest = (1.0 - p_true) / max(k - 1, 1)
        flat = onehot * p_true + (1.0 - onehot) * rest
        correct = (z.argmax(-1) == y).unsqueeze(-1)
        return torch.where(correct, flat, onehot)


def branch(mean_loss: float, alpha: float, epoch: int) -> str:
    """Which step Algorithm 1 takes for a batch of mean loss ``mean_loss`` in ``epoch``
    (counted from 0): ``descend``, ``ascend`` or ``flatten``."""
    if mean_loss >= alpha:
        return DESCEND
    return ASCEND if epoch % 2 == 0 else FLATTEN


class RelaxLoss(Defence):
    name = "relaxloss"
    tag = "rl"
    title = "RelaxLoss"
    knob = Knob("alpha", "α", 0.0, 10.0, grid=(0.3, 0.6, 1.0), low_open=True)
    paper = ("Chen, Yu and Fritz, RelaxLoss: Defending Membership Inference Attacks without Losing Utility "
             "(ICLR 2022, arXiv 2207.05801)")
    formula = "descend while L ≥ α; below α ascend (−L) or flatten the posterior, on alternate epochs"

    def objective(self, log_p: torch.Tensor, ce: torch.Tensor, y: torch.Tensor | None,
                  values: tuple[float, ...], epoch: int) -> torch.Tensor:
        """Per model: L where L ≥ α, else −L (even epochs) or the cross-entropy against the
        flattened posterior (odd epochs); chosen on the device, the gradient through the
        chosen branch only."""
        import torch

        if epoch % 2 == 0:
            below = -ce                                                          # gradient ascent
        else:                                                                    # posterior flattening
            assert y is not None  # RelaxLoss trains on the labels, never on soft targets
            below = -(flattened_targets(log_p, y) * log_p).sum(-1).mean(-1)
        return torch.where(ce >= knobs(values, ce), ce, below)


DEFENCE = RelaxLoss()
