"""Adversarial regularisation, knob λ: the classifier f trains against an inference model h
that learns, at the same time, to tell its members from a reference set (Nasr, Shokri and
Houmansadr, *Machine Learning with Membership Privacy using Adversarial Regularization*, CCS
2018, arXiv 1807.05852; the authors' code is github.com/SPIN-UMass/ML-Privacy-Regulization).

**The game.** The paper's min-max problem is

    min_f ( L_D(f) + λ · max_h G_f(h) ),
    G_f(h) = 1/|D| Σ_D log h(x, y, f(x)) + 1/|D'| Σ_D' log(1 − h(x', y', f(x'))),

D the members, D' the reference set (samples of the same distribution the model does not
train on: :attr:`TrainingContext.reference`, for a target the shadow parts), h(·) ∈ (0, 1) the
inference model's belief that a sample is a member. Algorithm 1 alternates, for each
classifier step, k steps of the inference model, each on a fresh mini-batch of m members and
m reference samples, ascending ∇_h G (the log-likelihood of telling them apart, i.e. the
binary cross-entropy with members labelled 1, reference samples 0), and then one classifier
step on a mini-batch of members, descending

    ∇_f ( 1/m Σ ℓ(f(x_i), y_i) + λ · 1/m Σ log h(x_i, y_i, f(x_i)) ),

the loss plus λ times the members' part of the gain: the classifier is pushed to make its
members look like reference samples to h (λ = 0 is plain training).

**Here.** The classifier's step is the trainer's (its batch, its Adam); :meth:`_AdvReg.loss`
adds λ · mean log h on the batch (``t`` are the batch's labels). The inference model's k =
:data:`INFERENCE_STEPS` steps run in :meth:`_AdvReg.after_step`, after each classifier step,
and k steps run once before the first one (at the first :meth:`_AdvReg.loss`, when the
trainer's batch size is known, before the λ-term is computed), so the order is Algorithm 1's:
h^k, f, h^k, f, … (the last h^k, after the last classifier step, changes nothing the model
keeps). Algorithm 1 leaves k free; the authors' code alternates a few steps
of each; k = 1 here. Member batches for h are drawn afresh from all members, reference
batches from the reference set, both of the trainer's batch size, uniformly with replacement,
from the defence's seeded device generator (:attr:`TrainingContext.generator`). The
classifier's outputs that h sees in its own steps are computed in eval mode without
gradients (the authors do the same; batch-norm statistics never see reference data), on the
clean members (no flip, no MG mask: the attacks query clean inputs); the λ-term sees the
training forward of the batch as trained.

**The inference model.** The paper's h has one branch for the prediction vector f(x), one for
the one-hot label y, and a combining stack ending in a sigmoid (its Figure and the authors'
``InferenceAttack_HZ``: f(x) → 1024 → 512 → 64, y → 128 → 64, combined 128 → 256 → 128 → 64
→ 1). This module keeps the shape, narrowed for small runs (f(x) → 256 → 64, y → 64,
combined 128 → 64 → 1, ReLU), and omits the raw input x, which the paper's h(x, y, f(x))
admits but the authors' black-box code does not use either. h sees f(x) as softmax
probabilities (the paper's prediction vector) and y one-hot in {0, 1}. It is built with
PyTorch's default initialisation under a seed drawn from the defence's NumPy generator
(:attr:`TrainingContext.rng`), inside a fork of torch's RNG, so its weights are
reproducible and the trainer's own torch RNG stream is left as it was; its optimiser is its
own Adam (learning rate :data:`INFERENCE_LR`; the authors use 1e-4 to 1e-5 over hundreds of
epochs, this module's runs are far shorter). log h is computed as log σ(a) from h's logit a,
which is exact and finite where σ(a) rounds to 0 or 1.

**Scale of λ.** The paper's λ-term, λ · mean log h, is unbounded below: the classifier can
lower it without end by making its members look very unlike members to the current h, at the
cost of the cross-entropy. Over 60 epochs on digits (449 members, the default recipe) λ = 1
and 3 cost 2 and 15 points of test accuracy, λ = 10 left the model at chance; the default
grid stays at or below 3. (The authors' code uses bounded variants of the term, the mean of h
or its squared distance to 1; this module follows the paper's formula.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.defences.base import Defence, Knob
from privaudit.defences.hooks import TrainingContext, TrainingHooks, cross_entropy
from privaudit.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch
    from torch import nn

#: inference-model steps per classifier step (Algorithm 1's k)
INFERENCE_STEPS = 1
#: the inference model's Adam learning rate
INFERENCE_LR = 1e-3
#: widths of the prediction branch, the label branch and the combining layer
PRED_WIDTHS = (256, 64)
LABEL_WIDTH = 64
COMBINE_WIDTH = 64


def inference_model(num_classes: int) -> nn.Module:
    """The inference model h: (probabilities (N, K), one-hot labels (N, K)) → logit a (N,),
    h = σ(a). Built with torch's current RNG (the caller seeds it)."""
    import torch
    from torch import nn

    class InferenceModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.prediction = nn.Sequential(nn.Linear(num_classes, PRED_WIDTHS[0]), nn.ReLU(),
                                            nn.Linear(PRED_WIDTHS[0], PRED_WIDTHS[1]), nn.ReLU())
            self.label = nn.Sequential(nn.Linear(num_classes, LABEL_WIDTH), nn.ReLU())
            self.combine = nn.Sequential(nn.Linear(PRED_WIDTHS[1] + LABEL_WIDTH, COMBINE_WIDTH), nn.ReLU(),
                                         nn.Linear(COMBINE_WIDTH, 1))

        def forward(self, probs: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
            z = torch.cat((self.prediction(probs), self.label(onehot)), dim=1)
            logit: torch.Tensor = self.combine(z).squeeze(1)
            return logit

    return InferenceModel()


class _AdvReg(TrainingHooks):
    def __init__(self, lam: float, num_classes: int, steps: int = INFERENCE_STEPS, lr: float = INFERENCE_LR):
        self.lam, self.num_classes, self.steps, self.lr = lam, num_classes, steps, lr
        self.h: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.ctx: TrainingContext | None = None
        self.batch_size: int | None = None
        #: the inference model's last step: its gain G (mean log-likelihood) and accuracy
        self.last_gain: float | None = None
        self.last_accuracy: float | None = None

    # -- the inference model --------------------------------------------------------------
    def setup(self, ctx: TrainingContext) -> None:
        import torch

        if ctx.reference is None or len(ctx.reference[0]) == 0:
            raise ConfigError("adversarial regularisation needs a reference set (samples the model does not "
                              "train on); the trainer hands none")
        self.ctx = ctx
        seed = int(ctx.rng.integers(2**62))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            h = inference_model(self.num_classes)
        self.h = h.to(ctx.x.device)
        self.optimizer = torch.optim.Adam(self.h.parameters(), lr=self.lr)
        self.batch_size = None

    def _features(self, probs: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        import torch.nn.functional as F

        return probs, F.one_hot(y, self.num_classes).to(probs.dtype)

    def inference_logits(self, probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """h's logit a on prediction vectors ``probs`` (N, K) with labels ``y`` (N,)."""
        assert self.h is not None  # built by setup
        logit: torch.Tensor = self.h(*self._features(probs, y))
        return logit

    def _outputs(self, model: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The classifier's probabilities on ``x`` as h sees them in its own steps (eval mode,
        no gradient)."""
        import torch

        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                return torch.softmax(model(x).float(), dim=-1)
        finally:
            model.train(was_training)

    def train_inference(self, model: nn.Module, batch_size: int) -> None:
        """k steps of h, each on m fresh members and m reference samples: ascend
        G = mean log h(members) + mean log(1 − h(reference))."""
        import torch
        import torch.nn.functional as F

        ctx, h, optimizer = self.ctx, self.h, self.optimizer
        assert ctx is not None and ctx.reference is not None  # set up, with the reference set it needs
        assert h is not None and optimizer is not None
        xr, yr = ctx.reference
        g = ctx.generator
        h.train()
        for _ in range(self.steps):
            im = torch.randint(len(ctx.y), (batch_size,), generator=g, device=g.device).to(ctx.x.device)
            ir = torch.randint(len(yr), (batch_size,), generator=g, device=g.device).to(xr.device)
            pm, pr = self._outputs(model, ctx.x[im]), self._outputs(model, xr[ir])
            am = self.inference_logits(pm, ctx.y[im])
            ar = self.inference_logits(pr, yr[ir])
            gain = F.logsigmoid(am).mean() + F.logsigmoid(-ar).mean()  # log(1 − σ(a)) = log σ(−a)
            optimizer.zero_grad(set_to_none=True)
            (-gain).backward()
            optimizer.step()
            self.last_gain = float(gain.detach())
            self.last_accuracy = float(((am > 0).float().mean() + (ar <= 0).float().mean()) / 2)

    def membership_accuracy(self, model: nn.Module, x_members: torch.Tensor, y_members: torch.Tensor,
                            x_reference: torch.Tensor, y_reference: torch.Tensor) -> float:
        """h's balanced accuracy (members called members, reference samples not) on the given
        samples: (TPR + TNR) / 2."""
        import torch

        with torch.no_grad():
            am = self.inference_logits(self._outputs(model, x_members), y_members)
            ar = self.inference_logits(self._outputs(model, x_reference), y_reference)
        return float(((am > 0).float().mean() + (ar <= 0).float().mean()) / 2)

    # -- the classifier's objective -------------------------------------------------------
    def privacy_term(self, logits: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """mean log h(x, y, f(x)) over the batch, differentiable in the logits (h fixed)."""
        import torch
        import torch.nn.functional as F

        h = self.h
        assert h is not None  # built by setup
        h.requires_grad_(False)
        try:
            probs = torch.softmax(logits.float(), dim=-1)
            return F.logsigmoid(self.inference_logits(probs, t).float()).mean()
        finally:
            h.requires_grad_(True)

    def loss(self, logits: torch.Tensor, t: torch.Tensor, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        if t.dim() != 1:
            raise ValueError("adversarial regularisation trains on the members' labels (N,), not soft targets")
        if self.batch_size is None:  # Algorithm 1: k steps of h before the first classifier step
            assert self.ctx is not None  # set up
            self.batch_size = len(t)
            self.train_inference(self.ctx.model, self.batch_size)
        ce = cross_entropy(logits, t)
        return ce + self.lam * self.privacy_term(logits, t), ce.detach()

    def after_step(self, model: nn.Module, x: torch.Tensor, t: torch.Tensor) -> None:
        self.train_inference(model, self.batch_size or len(x))


class AdversarialRegularization(Defence):
    name = "advreg"
    tag = "ar"
    title = "adversarial regularisation"
    knob = Knob("lambda", "λ", 0.0, 100.0, grid=(0.5, 1.0, 3.0), low_open=True, search_max=10.0)
    paper = ("Nasr, Shokri and Houmansadr, Machine Learning with Membership Privacy using Adversarial "
             "Regularization (CCS 2018, arXiv 1807.05852)")
    formula = "min_f CE + λ·mean log h(x, y, f(x)) on members; h trained to tell members from a reference set"
    needs_reference = True

    def hooks(self, value: float, num_classes: int) -> TrainingHooks:
        return _AdvReg(value, num_classes)


DEFENCE = AdversarialRegularization()
