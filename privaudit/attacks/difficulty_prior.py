"""A learned difficulty prior: each sample's OUT mean predicted from its image (docs/methods/d-attacks.md D.7).

Few-reference LiRA (:func:`privaudit.attacks.lira.lira_bayes_scores`) estimates each sample's
OUT mean μ_out from the few reference models that left it out, about k/2 of k. A sample's
image says something about that mean before any reference is read: a blurred cat on a
cluttered background is hard for every model. This module turns that into a prior
μ_out ~ N(m̂(x, y), v̂) learned from the reference models' outputs on public samples only:

1. **An image embedding** (:class:`DifficultyPrior`, ``fit``): a small CNN classifier
   (three 3×3 convolutions of 32, 64, 64 filters with ReLU and 2×2 pooling, global average
   pooling, a linear layer), trained with random mirrors on one half of the public samples
   (half A) for their class labels. A sample's features are the 64 pooled activations, the
   classifier's log-probabilities and its margin at the sample's label, and the one-hot
   label. The classifier never sees a reference model or a membership.
2. **A regression per reference set** (``out_mean``): on the other public half (B), which
   the embedding did not train on and no reference model trained on, the target is each
   sample's mean statistic over the references (every public sample is OUT of every
   reference); ridge regression on the standardised features, its penalty chosen by
   leave-one-out error (scikit-learn's ``RidgeCV``). Because half B and the audited samples
   are both non-members of the embedding, the features mean the same on both.
3. **The prior's variance**: the regression's leave-one-out mean squared error on half B
   estimates v̂ + s²/R (the target averages R references with spread s around μ_out); the
   mean within-sample variance over the references, divided by R, is taken off (floored at
   1 % of the target's variance). With one reference that spread is unknown and the whole
   error is kept: a wider, so weaker, prior.

Why not regress straight from pixels or train the CNN on the references' outputs: the
quantile attack's one-layer MLP on raw pixels (D.8) finds 0.7 % of members at 0.1 % FPR on
the CIFAR-10 CNN pool, a weak difficulty signal; and a CNN trained on the references'
outputs would have to be trained again for every reference set (k references seen, not the
pool's). The embedding is trained once per audit, the ridge head in milliseconds per set.

All randomness (the halves, the initialisation, the batches, the mirrors) comes from one
``torch.Generator`` seeded with ``seed``; fit and predict run on ``threads`` torch threads. At
most ``max_public`` public samples are used (a random subset), which bounds the embedding's
training: about three minutes on one CPU thread for 5,000 CIFAR-10 images and 12 epochs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from sklearn.preprocessing import StandardScaler
from torch import nn

from privaudit.attacks.quantile import torch_threads

#: fewer public samples than this are refused (each half trains or fits on half of them)
MIN_PUBLIC = 200
#: public samples used at most (half train the embedding, half fit the regression): the
#: embedding's cost grows with them, the prior's quality little beyond a few thousand
MAX_PUBLIC = 10_000
#: the prior variance's floor, as a share of the regression target's variance
MIN_PRIOR_SHARE = 0.01


def _embedding_net(channels: int, num_classes: int) -> nn.Sequential:
    def block(cin: int, cout: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]

    return nn.Sequential(*block(channels, 32), *block(32, 64), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))


class DifficultyPrior:
    """A prior N(m̂(x, y), v̂) over each sample's OUT mean, learned from public samples.

    ``fit(x_public, y_public)`` trains the embedding on half A of the public samples and
    embeds half B (``regress_index_``: their positions in the public set);
    ``features(x, y)`` embeds the audited samples (once); ``out_mean(public_stats,
    features)`` fits the regression for one reference set and returns the prior's mean
    (n, A) and variance (A,) for the audited samples.

    Shapes: ``x`` (N, C, H, W) images (any real dtype, uint8 pixels included), ``y`` (N,)
    integer labels in [0, classes); ``public_stats`` (R, z, A): each reference model's
    statistic (e.g. LiRA's φ, A queries) on every public sample (z, in the order given to
    ``fit``). Bad input raises ValueError.
    """

    def __init__(self, *, seed: int = 0, epochs: int = 12, batch_size: int = 128, lr: float = 2e-3,
                 max_public: int = MAX_PUBLIC, threads: int | None = 1):
        if int(epochs) < 1 or int(batch_size) < 1 or not lr > 0:
            raise ValueError("epochs and batch_size must be positive integers and lr positive")
        if int(max_public) < MIN_PUBLIC:
            raise ValueError(f"max_public must be at least {MIN_PUBLIC}, got {max_public}")
        if threads is not None and int(threads) < 1:
            raise ValueError(f"threads must be a positive integer or None, got {threads}")
        self.seed, self.epochs, self.batch_size, self.lr = int(seed), int(epochs), int(batch_size), float(lr)
        self.max_public = int(max_public)
        self.threads = None if threads is None else int(threads)
        self.net_: nn.Sequential | None = None

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        z = (np.asarray(x, dtype=np.float32) - self.mean_) / self.std_
        return torch.from_numpy(np.ascontiguousarray(z, dtype=np.float32))

    def fit(self, x_public: npt.ArrayLike, y_public: npt.ArrayLike) -> DifficultyPrior:
        """Train the embedding on a random half of (at most ``max_public`` of) the public
        samples; embed the other half."""
        x, y = _check_images(x_public, y_public, "public")
        if len(y) < MIN_PUBLIC:
            raise ValueError(f"need at least {MIN_PUBLIC} public samples for the difficulty prior, got {len(y)}")
        gen = torch.Generator().manual_seed(self.seed)
        order = torch.randperm(len(y), generator=gen).numpy()[: self.max_public]
        train, regress = np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2:])
        self.classes_ = int(y.max()) + 1
        self.mean_ = x[train].astype(np.float32).mean(axis=(0, 2, 3), keepdims=True)[0]
        self.std_ = np.maximum(x[train].astype(np.float32).std(axis=(0, 2, 3), keepdims=True)[0], 1e-6)
        with torch_threads(self.threads):
            self.net_ = self._train(self._tensor(x[train]), torch.from_numpy(y[train]), gen)
        self.regress_index_ = regress
        self.regress_features_ = self.features(x[regress], y[regress])
        self.scaler_ = StandardScaler().fit(self.regress_features_)  # the regression's design, each reference set's
        self.regress_design_ = self.scaler_.transform(self.regress_features_)
        return self

    def _train(self, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator) -> nn.Sequential:
        torch_state = torch.random.get_rng_state()
        torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=gen)))
        net = _embedding_net(x.shape[1], self.classes_)
        torch.random.set_rng_state(torch_state)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        steps = self.epochs * -(-len(y) // self.batch_size)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, self.lr, total_steps=steps)
        net.train()
        for _ in range(self.epochs):
            perm = torch.randperm(len(y), generator=gen)
            for start in range(0, len(y), self.batch_size):
                idx = perm[start:start + self.batch_size]
                xb = x[idx]
                flip = torch.rand(len(idx), generator=gen) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
                loss = nn.functional.cross_entropy(net(xb), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        return net.eval()

    def features(self, x: npt.ArrayLike, y: npt.ArrayLike) -> np.ndarray:
        """Each sample's features (N, 64 + 2·classes + 1): pooled activations, log-probabilities,
        the margin at its label (log p_y − the largest other), its one-hot label."""
        if self.net_ is None:
            raise ValueError("DifficultyPrior is not fitted: call fit(x_public, y_public) first")
        net = self.net_
        xs, ys = _check_images(x, y, "audited")
        if ys.size and ys.max() >= self.classes_:
            raise ValueError(f"label {int(ys.max())} is outside the fitted classes [0, {self.classes_})")

        def embed() -> tuple[np.ndarray, np.ndarray]:
            pooled, logp = [], []
            with torch.no_grad():
                for start in range(0, len(ys), 1024):
                    h = net[:-1](self._tensor(xs[start:start + 1024]))
                    pooled.append(h.numpy())
                    logp.append(torch.log_softmax(net[-1](h), dim=1).numpy())
            return np.concatenate(pooled), np.concatenate(logp)

        with torch_threads(self.threads):
            pooled, logp = embed()
        rows = np.arange(len(ys))
        at_label = logp[rows, ys]
        others = logp.copy()
        others[rows, ys] = -np.inf
        onehot = np.eye(self.classes_)[ys]
        margin = (at_label - others.max(axis=1))[:, None]
        return np.concatenate([pooled, logp, margin, onehot], axis=1).astype(np.float64)

    def out_mean(self, public_stats: npt.ArrayLike, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prior of each audited sample's OUT mean for one reference set: mean (n, A) and
        variance (A,), from the references' statistics ``public_stats`` (R, z, A) or (R, z)."""
        from sklearn.linear_model import RidgeCV

        if self.net_ is None:
            raise ValueError("DifficultyPrior is not fitted: call fit(x_public, y_public) first")
        stats = np.asarray(public_stats, dtype=np.float64)
        stats = stats[..., None] if stats.ndim == 2 else stats
        if stats.ndim != 3 or stats.shape[1] <= self.regress_index_.max() or not np.all(np.isfinite(stats)):
            raise ValueError(f"public_stats must be finite, (R, z, A) over the {self.regress_index_.max() + 1}+ "
                             f"public samples given to fit, got shape {stats.shape}")
        s = stats[:, self.regress_index_]  # (R, zB, A)
        target = s.mean(axis=0)
        ridge = RidgeCV(alphas=np.logspace(-2, 4, 13), store_cv_results=True)
        ridge.fit(self.regress_design_, target)
        best = int(np.argmin(np.abs(ridge.alphas - ridge.alpha_)))
        cv = ridge.cv_results_.reshape(len(target), -1, len(ridge.alphas))[:, :, best]  # squared LOO errors
        loo = cv.mean(axis=0)  # (A,)
        noise = s.var(axis=0, ddof=1).mean(axis=0) / s.shape[0] if s.shape[0] >= 2 else np.zeros_like(loo)
        var = np.maximum(loo - noise, MIN_PRIOR_SHARE * target.var(axis=0))
        mean = np.asarray(ridge.predict(self.scaler_.transform(np.asarray(features, dtype=np.float64))))
        return mean.reshape(len(features), -1), var


def _check_images(x: npt.ArrayLike, y: npt.ArrayLike, name: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = np.asarray(x), np.asarray(y)
    if xs.ndim != 4 or not np.issubdtype(xs.dtype, np.number):
        raise ValueError(f"{name} images must be a numeric array (N, C, H, W), got shape {xs.shape}")
    if ys.shape != (len(xs),) or not np.issubdtype(ys.dtype, np.integer) or (ys.size and ys.min() < 0):
        raise ValueError(f"{name} labels must be non-negative integers, one per image ({len(xs)}), got {ys.shape}")
    return xs, ys.astype(np.int64)
