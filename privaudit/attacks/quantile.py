"""The quantile-regression membership-inference attack (docs/methods/d-attacks.md D.8).

Bertran, Tang, Roth, Kearns, Morgenstern, Wu, *Scalable Membership Inference Attacks via
Quantile Regression*, NeurIPS 2023, arXiv:2307.03694. No shadow models: a regression model
is fit on PUBLIC data that the audited model did not train on, to predict, from a sample
(x, y) alone, the distribution of the audited model's score s(x, y) on non-members. A
member's score is then judged against its own predicted non-member distribution rather
than against one threshold for all samples, which removes the per-sample "difficulty"
(some samples get a high confidence whether or not they were trained on).

privaudit ships the paper's Gaussian variant, the one that gives a whole ROC curve: the
regressor predicts a mean μ̂(x, y) and a log standard deviation log σ̂(x, y), trained by the
Gaussian negative log-likelihood

    NLL = log σ̂ + (s − μ̂)² / (2 σ̂²),

and the membership score is the standardised residual z = (s − μ̂(x, y)) / σ̂(x, y); the
threshold z ≥ Φ⁻¹(1 − α) is the paper's test at false-positive rate α when the Gaussian
fits. The pinball-loss variant (one quantile for one α per model) is not shipped.

The regressor is deliberately small, so that it trains in seconds on two CPU cores (the
authors use a ConvNeXt): one hidden layer (``hidden`` ReLU units) on the flattened image,
standardised per feature with the training part's mean and standard deviation,
concatenated with the one-hot label; the target score is standardised the same way. Adam,
at most ``epochs`` epochs of shuffled mini-batches, early stopping on the NLL of a held-out
``val_fraction`` of the public data (the weights of the best epoch are kept, training
stops after ``patience`` epochs without improvement). All randomness (the split, the
initialisation, the batch order) comes from one ``torch.Generator`` seeded with ``seed``,
so on the CPU the same seed and data give the same scores bit for bit. Fit and predict run
on ``threads`` torch threads (default 1; the process-wide setting is restored afterwards),
which fixes the order of floating-point reductions whatever the caller's setting; one thread
is also the faster for a tiny MLP, whose many small operations pay for synchronising threads
(docs/performance.md). Training is float32; scores are returned in float64.

The score s is the caller's; privaudit uses LiRA's logit-scaled confidence φ
(:func:`privaudit.attacks.lira.logit_scaled_confidence`). The public samples must be
non-members of the audited model and disjoint from the evaluated non-members (e.g. the
population samples that no model trained on); otherwise the regressor learns the very
samples it is asked to judge.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

MIN_PUBLIC = 100       # fewer public samples than this are refused
LOG_STD_CLAMP = 7.0    # |log σ̂| in standardised units, for a finite NLL early in training


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` torch threads (process-wide while inside; None: leave the
    setting), then restore: a small regressor's fit and predict reduce in a fixed order."""
    old = torch.get_num_threads()
    if threads is not None and threads != old:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)


def _images(x: npt.ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim < 2:
        raise ValueError(f"{name} must have shape (N, ...) with one row per sample, got {arr.shape}")
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype}")
    flat = arr.reshape(arr.shape[0], -1).astype(np.float32)
    if flat.shape[1] == 0:
        raise ValueError(f"{name} has no features per sample (shape {arr.shape})")
    if not np.all(np.isfinite(flat)):
        raise ValueError(f"{name} must be finite (it has NaN or inf values)")
    return flat


def _labels(y: npt.ArrayLike, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), one label per sample, got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not (np.issubdtype(arr.dtype, np.number) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise ValueError(f"{name} must be integer class labels")
    out = arr.astype(np.int64)
    if out.size and out.min() < 0:
        raise ValueError(f"{name} must be non-negative class labels, got {out.min()}")
    return out


def _scores(s: npt.ArrayLike, n: int, name: str) -> np.ndarray:
    arr = np.asarray(s)
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), one score per sample, got {arr.shape}")
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        bad = int((~np.isfinite(arr)).sum())
        raise ValueError(f"{name} must be finite ({bad} NaN or inf values)")
    return arr


class QuantileAttack:
    """Gaussian quantile-regression membership attack (Bertran et al. 2023), a small MLP.

    ``fit(x_public, y_public, scores_public)`` learns μ̂(x, y) and σ̂(x, y) of the audited
    model's score on public non-members; ``scores(x, y, target_scores)`` returns
    (s − μ̂)/σ̂, float64, higher = more likely a member. ``predict(x, y)`` gives (μ̂, σ̂).

    Shapes: ``x`` (N, ...) real images (flattened inside), ``y`` (N,) integer labels in
    [0, C) with C = ``n_classes`` or the largest public label + 1, scores (N,) finite.
    Bad input (fewer than ``min_public`` public samples, one class only, non-finite
    values, mismatched shapes, a fit whose loss becomes NaN) raises ValueError.
    ``threads``: torch threads for fit and predict (None: leave the process setting).
    """

    def __init__(self, *, seed: int = 0, hidden: int = 256, epochs: int = 20, batch_size: int = 256,
                 lr: float = 1e-3, weight_decay: float = 1e-4, val_fraction: float = 0.1,
                 patience: int = 3, n_classes: int | None = None, min_public: int = MIN_PUBLIC,
                 threads: int | None = 1):
        if int(hidden) < 1 or int(epochs) < 1 or int(batch_size) < 1 or int(patience) < 1:
            raise ValueError("hidden, epochs, batch_size and patience must be positive integers")
        if not (0.0 < val_fraction < 0.5):
            raise ValueError(f"val_fraction must lie in (0, 0.5), got {val_fraction}")
        if not (lr > 0 and weight_decay >= 0):
            raise ValueError("lr must be positive and weight_decay non-negative")
        if n_classes is not None and int(n_classes) < 2:
            raise ValueError(f"n_classes must be at least 2, got {n_classes}")
        if int(min_public) < 10:
            raise ValueError(f"min_public must be at least 10, got {min_public}")
        if threads is not None and int(threads) < 1:
            raise ValueError(f"threads must be a positive integer or None, got {threads}")
        self.seed = int(seed)
        self.hidden = int(hidden)
        self.epochs = int(epochs)
        self.batch_size = int(batch_size)
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)
        self.val_fraction = float(val_fraction)
        self.patience = int(patience)
        self.n_classes = None if n_classes is None else int(n_classes)
        self.min_public = int(min_public)
        self.threads = None if threads is None else int(threads)
        self.net_: nn.Sequential | None = None
        self.history_: list[tuple[float, float]] = []  # (train NLL, validation NLL) per epoch
        self.best_epoch_: int | None = None

    # -- helpers ------------------------------------------------------------------------

    def _design(self, flat: np.ndarray, y: np.ndarray) -> torch.Tensor:
        z = (flat - self.x_mean_) / self.x_std_
        onehot = np.zeros((len(y), self.n_classes_), dtype=np.float32)
        onehot[np.arange(len(y)), y] = 1.0
        return torch.from_numpy(np.concatenate([z, onehot], axis=1).astype(np.float32, copy=False))

    def _init(self, n_in: int, gen: torch.Generator) -> nn.Sequential:
        first, last = nn.Linear(n_in, self.hidden), nn.Linear(self.hidden, 2)
        net = nn.Sequential(first, nn.ReLU(), last)
        with torch.no_grad():
            for layer in (first, last):
                bound = float(1.0 / np.sqrt(layer.in_features))  # PyTorch's default Linear bounds
                layer.weight.uniform_(-bound, bound, generator=gen)
                layer.bias.uniform_(-bound, bound, generator=gen)
            last.bias.zero_()  # start at μ̂ = mean, σ̂ = std of the public scores
        return net

    @staticmethod
    def _nll(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        mu, log_sd = out[:, 0], out[:, 1].clamp(-LOG_STD_CLAMP, LOG_STD_CLAMP)
        return (log_sd + 0.5 * ((target - mu) * torch.exp(-log_sd)) ** 2).mean()

    # -- API ----------------------------------------------------------------------------

    def fit(self, x_public: npt.ArrayLike, y_public: npt.ArrayLike, scores_public: npt.ArrayLike) -> QuantileAttack:
        """Fit μ̂ and σ̂ on public non-members; returns ``self``."""
        with torch_threads(self.threads):
            return self._fit(x_public, y_public, scores_public)

    def _fit(self, x_public: npt.ArrayLike, y_public: npt.ArrayLike, scores_public: npt.ArrayLike) -> QuantileAttack:
        flat = _images(x_public, "x_public")
        n = flat.shape[0]
        y = _labels(y_public, n, "y_public")
        s = _scores(scores_public, n, "scores_public")
        if n < self.min_public:
            raise ValueError(f"need at least {self.min_public} public non-member samples to fit the "
                             f"quantile regression, got {n}")
        classes = np.unique(y)
        if classes.size < 2:
            raise ValueError(f"y_public has a single class ({int(classes[0])}); the regression needs at least two")
        n_classes = int(y.max()) + 1 if self.n_classes is None else self.n_classes
        if y.max() >= n_classes:
            raise ValueError(f"y_public has label {int(y.max())}, outside [0, {n_classes})")

        gen = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(n, generator=gen).numpy()
        n_val = max(1, int(round(self.val_fraction * n)))
        val, train = order[:n_val], order[n_val:]

        self.n_classes_ = n_classes
        self.n_features_ = flat.shape[1]
        self.x_shape_ = np.asarray(x_public).shape[1:]
        self.x_mean_ = flat[train].mean(axis=0)
        sd = flat[train].std(axis=0)
        self.x_std_ = np.where(sd > 1e-8, sd, 1.0).astype(np.float32)
        self.s_mean_ = float(s[train].mean())
        self.s_std_ = float(s[train].std())
        if not self.s_std_ > 1e-12:
            raise ValueError("scores_public are all equal: there is no spread of non-member scores to regress")

        design = self._design(flat, y)
        target = torch.from_numpy(((s - self.s_mean_) / self.s_std_).astype(np.float32))
        x_tr, t_tr = design[train], target[train]
        x_va, t_va = design[val], target[val]

        net = self._init(design.shape[1], gen)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        best, stale = float("inf"), 0
        best_state: dict[str, torch.Tensor] | None = None
        self.history_ = []
        for epoch in range(self.epochs):
            net.train()
            perm = torch.randperm(len(train), generator=gen)
            total, seen = 0.0, 0
            for start in range(0, len(train), self.batch_size):
                idx = perm[start:start + self.batch_size]
                loss = self._nll(net(x_tr[idx]), t_tr[idx])
                if not torch.isfinite(loss):
                    raise ValueError(f"the quantile regression did not converge: NaN/inf loss in epoch {epoch + 1}; "
                                     "try a smaller lr")
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                seen += len(idx)
            net.eval()
            with torch.no_grad():
                val_loss = float(self._nll(net(x_va), t_va))
            if not np.isfinite(val_loss):
                raise ValueError(f"the quantile regression did not converge: NaN/inf validation loss in epoch "
                                 f"{epoch + 1}; try a smaller lr")
            self.history_.append((total / seen, val_loss))
            if val_loss < best:
                best, stale, self.best_epoch_ = val_loss, 0, epoch + 1
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                stale += 1
                if stale >= self.patience:
                    break
        assert best_state is not None  # the first epoch's (finite) validation loss is below inf
        net.load_state_dict(best_state)
        net.eval()
        self.net_ = net
        return self

    def predict(self, x: npt.ArrayLike, y: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """(μ̂, σ̂) of the non-member score of each sample, float64 arrays (N,), score units."""
        if self.net_ is None:
            raise ValueError("QuantileAttack is not fitted: call fit(x_public, y_public, scores_public) first")
        flat = _images(x, "x")
        if flat.shape[1] != self.n_features_:
            raise ValueError(f"x has {flat.shape[1]} features per sample, the fit had {self.n_features_} "
                             f"(shape {self.x_shape_})")
        y = _labels(y, flat.shape[0], "y")
        if y.size and y.max() >= self.n_classes_:
            raise ValueError(f"y has label {int(y.max())}, outside the fitted classes [0, {self.n_classes_})")
        with torch.no_grad(), torch_threads(self.threads):
            out = self.net_(self._design(flat, y)).double().numpy()
        if not np.all(np.isfinite(out)):
            raise ValueError("the fitted regressor gives non-finite outputs on these inputs (far outside the "
                             "public data's range?)")
        mu = self.s_mean_ + self.s_std_ * out[:, 0]
        sigma = self.s_std_ * np.exp(np.clip(out[:, 1], -LOG_STD_CLAMP, LOG_STD_CLAMP))
        return mu, sigma

    def scores(self, x: npt.ArrayLike, y: npt.ArrayLike, target_scores: npt.ArrayLike) -> np.ndarray:
        """Membership scores (s − μ̂(x, y))/σ̂(x, y), float64 (N,); higher = more likely a member."""
        mu, sigma = self.predict(x, y)
        s = _scores(target_scores, mu.size, "target_scores")
        z: np.ndarray = (s - mu) / sigma
        return z
