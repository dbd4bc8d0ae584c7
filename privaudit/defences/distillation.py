"""Knowledge distillation from teachers trained on disjoint parts, knob T (the softmax
temperature): the defended model (the student) trains on soft labels that no model which saw
the member produced. This is SELENA's Split-AI followed by its self-distillation (Tang et al.,
*Mitigating Membership Inference Attacks by Self-Distillation Through a Novel Ensemble
Architecture*, USENIX Security 2022, arXiv 2110.08324; the authors' code is
github.com/inspire-group/MIAdefenseSELENA), with the temperature of distillation for
membership privacy (DMP: Shejwalkar and Houmansadr, *Membership Privacy for Machine Learning
Models Through Knowledge Transfer*, AAAI 2021, arXiv 1906.06589) and of Hinton et al.
(*Distilling the Knowledge in a Neural Network*, arXiv 1503.02531).

**Teachers.** The members are split by a seeded random permutation (the defence's NumPy
generator, :attr:`TrainingContext.rng`) into :data:`TEACHERS` = K disjoint parts of equal
size (±1); teacher k is a fresh model of the run's architecture trained by the plain recipe
for the run's epochs on part k alone (:attr:`TrainingContext.train_submodel`, index k). SELENA
trains K sub-models on overlapping subsets so that each member is left out of L of them (its
K = 25, L = 10); disjoint parts are the case L = K − 1: every member is left out of all
teachers but its own.

**Soft labels.** Member i, of part o(i), gets the average over the K − 1 teachers k ≠ o(i) of
their temperature-T softmax,

    t_i = 1/(K − 1) Σ_{k ≠ o(i)} softmax(z_k(x_i) / T),

the average of probability vectors as SELENA's Split-AI averages its L sub-models' softmax
outputs (not of logits); at T = 1 these are exactly Split-AI's outputs on its training set.
The member's own teacher never enters its label (:func:`teacher_labels`), so nothing the
student trains on was computed by a model that saw the member. Higher T flattens every
teacher's softmax, so the labels carry more of the teachers' relative scores of the wrong
classes and less of their confidence.

**Student.** The defended model trains on these labels (:meth:`_Distill.targets`, one row per
member) with the soft cross-entropy at the same temperature, scaled by T² as Hinton et al. do
(so that the gradients keep their size as T changes; the trainer's Adam is invariant to a
constant scale up to its ε, so the factor matters only to the reported objective):

    ℓ = T² · ( −Σ_c t_ic · log softmax(s(x_i) / T)_c ).

At T = 1 this is SELENA's distillation loss (``-sum(targets * log softmax(outputs))``); DMP's
code descends the KL divergence between the two tempered softmaxes, which differs from it by the
labels' entropy (a constant, the same gradient). The student answers queries at temperature
1, as SELENA's and DMP's students do. The reported loss is the soft cross-entropy at T without
the T² factor, −Σ t·log softmax(s/T): the cross-entropy against the soft labels, as for label
smoothing, in nats whatever T.

**The knob's direction.** ``stronger`` is ``higher``: as T grows the student is fitted to the
non-owning teachers' whole score vectors (at large T, to their logits up to a constant, as
Hinton et al. show), i.e. to how models that never saw the member score it; as T → 0 the
labels tend to the share of those teachers voting for each class, which a student sharp at
small T fits as near-hard labels, as plain training fits the true ones. The protection comes
mostly from the split itself, at every T; over 60 epochs on digits (449 members) the
student's train-test loss gap was 0.10 at T = 1, 4 and 10 against 0.17 undefended, with test
accuracy 0.89-0.91 against 0.94: T moves neither much, so an accuracy-matched search over T
has little to move.

Cost: the K teachers see N/K members each for the run's epochs, about one plain training
in all, before the student's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob
from privaudit.defences.hooks import TrainingContext, TrainingHooks
from privaudit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import torch
    from torch import nn

#: the number of teachers (disjoint parts of the members)
TEACHERS = 4
#: members per forward pass when the teachers label them
LABEL_BATCH = 1024


def partition(n: int, parts: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``parts`` disjoint index arrays covering range(n), sizes equal ±1, from a random
    permutation drawn from ``rng`` (a NumPy generator)."""
    import numpy as np

    return [np.sort(p) for p in np.array_split(rng.permutation(n), parts)]


def owners(parts: Sequence[np.ndarray], n: int) -> np.ndarray:
    """o(i): the part (teacher) each of the n members belongs to, as an int64 array."""
    import numpy as np

    owner = np.full(n, -1, dtype=np.int64)
    for k, p in enumerate(parts):
        owner[p] = k
    return owner


def teacher_labels(logits: torch.Tensor, owner: np.ndarray | torch.Tensor, temperature: float) -> torch.Tensor:
    """Soft labels from teacher logits ``logits`` (K, N, C) and each member's own teacher
    ``owner`` (N,): row i is the mean over k ≠ owner[i] of softmax(logits[k, i] / T)."""
    import torch

    k = logits.shape[0]
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    owner = torch.as_tensor(owner, device=logits.device)
    keep = (torch.arange(k, device=logits.device)[:, None] != owner[None, :]).to(probs.dtype)  # (K, N)
    return (probs * keep[:, :, None]).sum(0) / keep.sum(0)[:, None]


class _Distill(TrainingHooks):
    def __init__(self, temperature: float, num_classes: int, teachers: int = TEACHERS):
        self.temperature, self.num_classes, self.teachers = temperature, num_classes, teachers
        self.parts: list[np.ndarray] = []
        self.owner: np.ndarray | None = None
        self.models: list[nn.Module] = []

    def setup(self, ctx: TrainingContext) -> None:
        if ctx.train_submodel is None:
            raise ConfigError("distillation trains teachers on parts of the members; the trainer hands no "
                              "sub-model trainer")
        n = len(ctx.y)
        if n < 2:
            raise ConfigError(f"distillation needs at least 2 members to split among teachers (got {n})")
        k = min(self.teachers, n)
        self.parts = partition(n, k, ctx.rng)
        self.owner = owners(self.parts, n)
        self.models = []
        for i, part in enumerate(self.parts):
            import torch

            idx = torch.as_tensor(part, device=ctx.x.device)
            self.models.append(ctx.train_submodel(ctx.x[idx], ctx.y[idx], i))

    def teacher_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Every teacher's logits on ``x``: (K, N, C), eval mode, no gradient."""
        import torch

        out = []
        with torch.no_grad():
            for m in self.models:
                m.eval()
                out.append(torch.cat([m(x[i:i + LABEL_BATCH]).float() for i in range(0, len(x), LABEL_BATCH)]))
        return torch.stack(out)

    def targets(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.owner is None or len(x) != len(self.owner):
            raise ValueError("distillation's targets are for the members its teachers were split from")
        return teacher_labels(self.teacher_logits(x), self.owner, self.temperature).to(x.dtype)

    def loss(self, logits: torch.Tensor, t: torch.Tensor, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch.nn.functional as F

        soft_ce = -(t * F.log_softmax(logits.float() / self.temperature, dim=-1)).sum(-1).mean()
        return self.temperature ** 2 * soft_ce, soft_ce.detach()


class Distillation(Defence):
    name = "distillation"
    tag = "kd"
    title = "distillation"
    knob = Knob("temperature", "T", 0.0, 100.0, grid=(1.0, 4.0, 10.0), low_open=True)
    paper = ("Tang et al., Mitigating Membership Inference Attacks by Self-Distillation Through a Novel Ensemble "
             "Architecture (USENIX Security 2022, arXiv 2110.08324); Shejwalkar and Houmansadr, Membership Privacy "
             "for Machine Learning Models Through Knowledge Transfer (AAAI 2021, arXiv 1906.06589)")
    formula = (f"soft label = mean softmax(z/T) of the {TEACHERS - 1} teachers (of {TEACHERS}, disjoint parts) "
               "that never saw the member; student loss T²·CE(t, softmax(s/T))")
    needs_submodels = True

    @property
    def searchable(self) -> bool:
        """Not searched to a target accuracy: the student's accuracy barely follows T (the
        split into teachers sets it), so an accuracy search audits its strongest default."""
        return False

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _Distill(value, num_classes)


DEFENCE = Distillation()
