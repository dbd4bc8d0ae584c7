"""The paper's shadow-model attack (ML-Leaks "adversary 1", docs/methods/a-mg-noise.md A.4).

Salem et al., *ML-Leaks* (NDSS 2019), as used by the MG-noise paper: one shadow model trained
with the target's exact recipe (defence included) on the shadow member part; attack features
are the model's softmax posteriors sorted descending, top 3; a logistic regression is fit on
the shadow's members (label 1) against its non-members (label 0), class-balanced, and
applied to the target's outputs. The decision threshold is 0.5 on the predicted member
probability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from privaudit.attacks.scores import top_k_posteriors


@dataclass
class ShadowAttack:
    """Logistic regression on top-k sorted posteriors (k = 3), features standardised on the
    shadow data (an affine map, so the fitted classifier is still a logistic regression on
    the posteriors; it only makes the default L2 penalty scale-free)."""

    k: int = 3
    threshold: float = 0.5
    model: Pipeline | None = None

    def fit(self, member_logits: np.ndarray, nonmember_logits: np.ndarray) -> ShadowAttack:
        """Fit on the shadow model's logits for its members and non-members."""
        return self.fit_features(top_k_posteriors(member_logits, self.k),
                                 top_k_posteriors(nonmember_logits, self.k))

    def fit_features(self, members: np.ndarray, nonmembers: np.ndarray) -> ShadowAttack:
        """Fit on precomputed top-k sorted posteriors, (N_in, k) and (N_out, k)."""
        x = np.concatenate([members, nonmembers])
        y = np.concatenate([np.ones(len(members)), np.zeros(len(nonmembers))])
        self.model = make_pipeline(StandardScaler(),
                                   LogisticRegression(class_weight="balanced", max_iter=1000)).fit(x, y)
        return self

    def scores(self, logits: np.ndarray) -> np.ndarray:
        """Predicted member probability for each row of ``logits``, shape (N,)."""
        return self.scores_features(top_k_posteriors(logits, self.k))

    def scores_features(self, features: np.ndarray) -> np.ndarray:
        """Predicted member probability for precomputed top-k posteriors (N, k), shape (N,)."""
        if self.model is None:
            raise RuntimeError("ShadowAttack.fit must be called first")
        proba: np.ndarray = self.model.predict_proba(features)[:, 1]
        return proba
