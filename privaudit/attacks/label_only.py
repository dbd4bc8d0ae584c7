"""Label-only membership inference: attacks that read the predicted label alone.

For a model whose API releases only its predicted label, or whose released scores were
truncated (top-k) or rounded (:mod:`privaudit.defences.output`), the score attacks of
:mod:`privaudit.attacks.scores` see little. The two attacks here need nothing but the label
the model predicts.

**The gap attack** (Yeom, Giacomelli, Fredrikson, Jha, *Privacy Risk in Machine Learning:
Analyzing the Connection to Overfitting*, CSF 2018, arXiv 1709.01604): guess "member" iff
the model classifies the sample correctly,

    s(x, y) = 1[f(x) = y].

Its ROC curve is the single point (FPR, TPR) = (P[f(x) = y | non-member],
P[f(x) = y | member]) joined to (0, 0) and (1, 1); so TPR − FPR = train accuracy − test
accuracy, the generalisation gap in 0-1 loss, is its membership advantage, and its AUC
(ties counted ½, the Mann–Whitney convention of :func:`privaudit.analysis.metrics.auc_score`)
is exactly

    AUC = TPR·(1 − FPR) + ½·[TPR·FPR + (1 − TPR)(1 − FPR)] = (1 + TPR − FPR) / 2.

**The data-augmentation attack** (Choquette-Choo, Tramèr, Carlini, Papernot, *Label-Only
Membership Inference Attacks*, ICML 2021, arXiv 2007.14321): a model is more robust to
small perturbations on the points it trained on, so the attacker queries the label on a
fixed set of augmented copies of the sample, T_1(x), …, T_A(x), and scores

    s(x, y) = (1/A) Σ_a 1[f(T_a(x)) = y]   ∈ {0, 1/A, …, 1},

the fraction of copies still classified correctly (the identity is one of the T_a, so the
gap attack's bit is part of it). The augmentations are translations by (dx, dy) pixels
(zero padding, no wrap-around) and, for datasets whose classes are mirror-symmetric,
horizontal flips. Two deterministic sets of translations of radius r are offered:

* ``shape="ball"`` (default): every shift with |dx| + |dy| ≤ r, 2r(r + 1) + 1 of them
  (5 for r = 1, 13 for r = 2);
* ``shape="ring"``: the identity and the shifts with |dx| + |dy| = r exactly, 4r + 1 of
  them: the set of the authors' released code (``create_translates(d)``, "4d + 1 total
  images per sample"); for r = 1 both sets are the same five.

``flip=True`` adds the mirror image of every one of them (twice as many queries).

Where the paper feeds the attacker the whole vector of A correctness bits and learns an
attack model on a shadow ("source") model's members and non-members, this module
summarises it by the fraction correct, which needs no training, is invariant to the order
of the augmentations and is a score that every metric of :mod:`privaudit.analysis.metrics`
turns into an AUC or a TPR at low FPR; :func:`augmentation_correctness` returns the full
(n, A) bit matrix for an attack model that wants it. The decision rule is the paper's
threshold attack: the threshold that separates the reference (shadow) model's own members
from its non-members best (:func:`reference_threshold`), applied to the audited model's
scores (:func:`infer_membership`).

Images are shifted in whatever space the caller hands them in: zero padding then means
black in raw pixel values, or the training mean where the inputs are already standardised.
The paper shifts raw images; the authors' code fills the border with the nearest edge pixel
(``scipy.ndimage.shift(mode="nearest")``), this module with zeros.

Shapes: images ``x`` (n, C, H, W) torch tensors (or arrays), ``labels`` (n,) integer class
indices; the attack's ``predict`` callable takes a batch (B, C, H, W) and returns its
predicted labels (B,) (or logits / released scores (B, classes), whose argmax is taken).
Scores are float64, "higher = more likely a member".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from privaudit.analysis.metrics import advantage_threshold, check_scores

SHAPES = ("ball", "ring")
DEFAULT_MAX_QUERIES = 4096  # images per call of ``predict`` (a chunk of samples × all views)
# the attack's model: a batch of images in, its predicted labels (or scores) out
Predict = Callable[[torch.Tensor], torch.Tensor | np.ndarray]


@dataclass(frozen=True)
class Augmentation:
    """One view of an image: mirror it left-right when ``flip``, then translate it by ``dx``
    pixels to the right (towards larger column index) and ``dy`` pixels down (towards larger
    row index), filling the uncovered border with zeros:

        out[c, i, j] = x'[c, i − dy, j − dx]  if 0 ≤ i − dy < H and 0 ≤ j − dx < W, else 0,

    with x' = x mirrored (x'[c, i, j] = x[c, i, W − 1 − j]) when ``flip``, else x."""

    dx: int = 0
    dy: int = 0
    flip: bool = False


@dataclass(frozen=True)
class AugmentationSpec:
    """The deterministic set of views the augmentation attack queries: translations of
    radius ``radius`` (``shape`` ``"ball"``: |dx| + |dy| ≤ r; ``"ring"``: the identity and
    |dx| + |dy| = r, the authors' code), each also mirrored when ``flip``."""

    radius: int = 1
    flip: bool = False
    shape: str = "ball"

    def __post_init__(self) -> None:
        if isinstance(self.radius, bool) or not isinstance(self.radius, (int, np.integer)) or self.radius < 0:
            raise ValueError(f"radius must be an integer >= 0, got {self.radius!r}")
        if self.shape not in SHAPES:
            raise ValueError(f"shape must be one of {', '.join(SHAPES)}, got {self.shape!r}")

    def augmentations(self) -> tuple[Augmentation, ...]:
        return augmentation_list(self.radius, flip=self.flip, shape=self.shape)

    @property
    def count(self) -> int:
        return augmentation_count(self.radius, flip=self.flip, shape=self.shape)


AugmentationsLike = AugmentationSpec | Sequence[Augmentation]


def augmentation_count(radius: int, *, flip: bool = False, shape: str = "ball") -> int:
    """How many views :func:`augmentation_list` gives: 2r(r + 1) + 1 for the ball (the lattice
    points with |dx| + |dy| ≤ r), 4r + 1 for the ring (identity and |dx| + |dy| = r, r ≥ 1;
    1 for r = 0); twice that with ``flip``."""
    AugmentationSpec(radius, flip, shape)  # validates
    r = int(radius)
    n = 2 * r * (r + 1) + 1 if shape == "ball" else 4 * r + 1
    return 2 * n if flip else n


def augmentation_list(radius: int, *, flip: bool = False, shape: str = "ball") -> tuple[Augmentation, ...]:
    """The views, in a fixed order: the identity first, then the translations by increasing
    |dx| + |dy| and within one distance by (dx, dy) ascending; with ``flip``, the same list
    mirrored follows. See :class:`AugmentationSpec` for the two shapes."""
    AugmentationSpec(radius, flip, shape)  # validates
    r = int(radius)
    distances = range(r + 1) if shape == "ball" else sorted({0, r})
    shifts = [(dx, dy) for d in distances for dx in range(-d, d + 1) for dy in range(-d, d + 1)
              if abs(dx) + abs(dy) == d]
    views = [Augmentation(dx, dy, False) for dx, dy in shifts]
    if flip:
        views += [Augmentation(dx, dy, True) for dx, dy in shifts]
    return tuple(views)


def _as_augmentations(augmentations: AugmentationsLike) -> tuple[Augmentation, ...]:
    views = augmentations.augmentations() if isinstance(augmentations, AugmentationSpec) else tuple(augmentations)
    if not views:
        raise ValueError("need at least one augmentation")
    for a in views:
        if not isinstance(a, Augmentation):
            raise TypeError(f"augmentations must be Augmentation views or an AugmentationSpec, got {a!r}")
    return views


def augment_images(x: torch.Tensor, augmentations: AugmentationsLike) -> torch.Tensor:
    """Every view of every image at once: shape (A, N, C, H, W) for ``x`` (N, C, H, W) and A
    views (:class:`Augmentation` defines one), same dtype and device as ``x``.

    One gather, no Python loop over views or pixels: ``x`` is zero-padded by the largest
    shift P on each side, and view a reads row i − dy_a + P and column
    (W − 1 − (j − dx_a) if flip_a else j − dx_a) + P of the padded image, which is a zero of
    the padding exactly when the source pixel lies outside the image (no wrap-around)."""
    views = _as_augmentations(augmentations)
    x = torch.as_tensor(x)
    if x.dim() != 4:
        raise ValueError(f"images must have shape (N, C, H, W), got {tuple(x.shape)}")
    _, _, h, w = x.shape
    dev = x.device
    dx = torch.tensor([int(a.dx) for a in views], device=dev)
    dy = torch.tensor([int(a.dy) for a in views], device=dev)
    flip = torch.tensor([bool(a.flip) for a in views], device=dev)
    pad = int(max(dx.abs().max(), dy.abs().max()))
    padded = torch.nn.functional.pad(x, (pad, pad, pad, pad)) if pad else x
    rows = torch.arange(h, device=dev)[None, :] - dy[:, None] + pad            # (A, H)
    src = torch.arange(w, device=dev)[None, :] - dx[:, None]                    # column in x' (A, W)
    cols = torch.where(flip[:, None], w - 1 - src, src) + pad                   # column in x  (A, W)
    out = padded[:, :, rows[:, :, None], cols[:, None, :]]                      # (N, C, A, H, W)
    return out.permute(2, 0, 1, 3, 4).contiguous()


def _predicted_labels(out: npt.ArrayLike | torch.Tensor, expected: int) -> np.ndarray:
    """``predict``'s answer as int64 labels (expected,): labels as they are, scores (B, K) by argmax."""
    if isinstance(out, torch.Tensor):
        out = out.detach().cpu().numpy()
    labels: np.ndarray = np.asarray(out)
    if labels.ndim == 2:
        labels = labels.argmax(axis=1)
    if labels.shape != (expected,):
        raise ValueError(f"predict returned shape {labels.shape} for {expected} queries; "
                         "expected labels (B,) or scores (B, classes)")
    if labels.dtype.kind not in "iub":
        if not np.all(labels == np.round(labels)):
            raise ValueError("predict must return integer class labels")
    return labels.astype(np.int64)


def _check_labels(labels: npt.ArrayLike | torch.Tensor, n: int) -> np.ndarray:
    y = (labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)).ravel()
    if y.shape != (n,):
        raise ValueError(f"labels {y.shape} do not match {n} samples")
    if y.dtype.kind not in "iu" and not np.all(y == np.round(y)):
        raise ValueError("labels must be integer class indices")
    return y.astype(np.int64)


def gap_scores(predictions: npt.ArrayLike | torch.Tensor, labels: npt.ArrayLike | torch.Tensor) -> np.ndarray:
    """The gap attack's score 1[ŷ = y] per sample, float64 (n,) of 0s and 1s (Yeom et al.,
    arXiv 1709.01604). ``predictions``: predicted labels (n,), or logits / released scores
    (n, C) whose argmax is the predicted label (the label an API returns beside its scores:
    every output defence of :mod:`privaudit.defences.output` keeps the model's own argmax)."""
    p = predictions.detach().cpu().numpy() if isinstance(predictions, torch.Tensor) else np.asarray(predictions)
    y = _check_labels(labels, p.shape[0] if p.ndim else -1)
    correct: np.ndarray = _predicted_labels(p, len(y)) == y
    return correct.astype(np.float64)


def gap_attack_metrics(membership: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """The gap attack's exact ROC point and AUC from its binary scores (:func:`gap_scores`) and
    the membership labels (1 = member, 0 = non-member):

    * ``tpr`` = mean score of the members (their accuracy), ``fpr`` = mean score of the
      non-members (their accuracy);
    * ``gap`` = TPR − FPR, the generalisation gap in 0-1 loss (signed);
    * ``advantage`` = max(TPR − FPR, 0), the best of the curve's three points (the
      thresholds +∞, 1, 0), as :func:`privaudit.analysis.metrics.advantage` gives;
    * ``auc`` = (1 + TPR − FPR) / 2, the area under the two-segment ROC curve through
      (FPR, TPR), equal to the Mann–Whitney AUC with ties counted ½.
    """
    labels, s = check_scores(membership, scores)
    if not np.all((s == 0.0) | (s == 1.0)):
        raise ValueError("the gap attack's scores are 0 or 1")
    tpr = float(s[labels == 1].mean())
    fpr = float(s[labels == 0].mean())
    return {"tpr": tpr, "fpr": fpr, "gap": tpr - fpr, "advantage": max(tpr - fpr, 0.0),
            "auc": 0.5 * (1.0 + tpr - fpr)}


def augmentation_correctness(predict: Predict, x: npt.ArrayLike | torch.Tensor, labels: npt.ArrayLike | torch.Tensor,
                             augmentations: AugmentationsLike = AugmentationSpec(), *,
                             max_queries: int = DEFAULT_MAX_QUERIES) -> np.ndarray:
    """The paper's attack features: bit (i, a) is 1[predict(T_a(x_i)) = y_i], bool (n, A).

    Samples go in chunks of max(1, ``max_queries`` // A): all A views of a chunk are built
    at once (:func:`augment_images`) and sent to ``predict`` in one call of at most
    ``max_queries`` images (or A, when A > ``max_queries``), under ``torch.no_grad``. The
    chunking does not change the result."""
    views = _as_augmentations(augmentations)
    x = torch.as_tensor(x)
    if x.dim() != 4:
        raise ValueError(f"images must have shape (N, C, H, W), got {tuple(x.shape)}")
    if max_queries < 1:
        raise ValueError(f"max_queries must be >= 1, got {max_queries}")
    n, a = x.shape[0], len(views)
    y = _check_labels(labels, n)
    chunk = max(1, max_queries // a)
    correct = np.empty((n, a), dtype=bool)
    with torch.no_grad():
        for start in range(0, n, chunk):
            xb = x[start:start + chunk]
            b = xb.shape[0]
            batch = augment_images(xb, views).reshape(a * b, *xb.shape[1:])   # view-major: row a·b + i
            pred = _predicted_labels(predict(batch), a * b).reshape(a, b)
            correct[start:start + b] = (pred == y[None, start:start + b]).T
    return correct


def augmentation_scores(predict: Predict, x: npt.ArrayLike | torch.Tensor, labels: npt.ArrayLike | torch.Tensor,
                        augmentations: AugmentationsLike = AugmentationSpec(), *,
                        max_queries: int = DEFAULT_MAX_QUERIES) -> np.ndarray:
    """The augmentation attack's score, the fraction of views classified correctly,

        s(x, y) = (1/A) Σ_a 1[predict(T_a(x)) = y],

    float64 (n,) in [0, 1] (Choquette-Choo et al., *Label-Only Membership Inference
    Attacks*, arXiv 2007.14321). See :func:`augmentation_correctness` for the batching."""
    correct = augmentation_correctness(predict, x, labels, augmentations, max_queries=max_queries)
    scores: np.ndarray = correct.mean(axis=1)
    return scores


def reference_threshold(ref_membership: np.ndarray, ref_scores: np.ndarray) -> float:
    """The paper's threshold rule: on a reference (shadow / source) model's own members and
    non-members, the threshold t maximising TPR(t) − FPR(t) with "member iff score ≥ t"
    (the balanced accuracy, which is the accuracy on the paper's balanced source sets);
    then applied unchanged to the audited model (:func:`infer_membership`). Never chosen
    on the audited model itself."""
    return advantage_threshold(ref_membership, ref_scores)


def infer_membership(scores: npt.ArrayLike, threshold: float) -> np.ndarray:
    """The threshold attack's decisions: member iff score ≥ ``threshold``, bool (n,)."""
    decided: np.ndarray = np.asarray(scores, dtype=np.float64).ravel() >= float(threshold)
    return decided


def label_predictor(model: torch.nn.Module, batch_size: int | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``predict`` for a torch classifier: the argmax of its logits on clean inputs, through
    the package's one inference path (:func:`privaudit.training.results.predict_logits`:
    eval mode, no autograd). The label is the model's own, which is what every output
    defence (:mod:`privaudit.defences.output`) still returns."""
    from privaudit.training.results import predict_logits

    def predict(x: torch.Tensor) -> torch.Tensor:
        return predict_logits(model, x, batch_size).argmax(dim=1)

    return predict
