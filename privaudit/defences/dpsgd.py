"""DP-SGD, knob σ (the noise multiplier; ``--target-epsilon`` calibrates σ instead).

Per-sample gradients clipped to norm C, summed, Gaussian noise N(0, σ²C²) added, divided by
the expected batch size, over Poisson-sampled batches; ε accounted by Opacus (Abadi et al.,
*Deep Learning with Differential Privacy*, CCS 2016, arXiv 1607.00133). Implemented in
:mod:`privaudit.training.dp_engine` and through Opacus; the config holds σ as the defence's
knob and C, δ (or a target ε instead of σ) in its ``params``. ``noisycgd`` is the same for ``convex-relu``:
noisy cyclic gradient descent with hidden-state accounting (docs/noisycgd.md).
"""

from __future__ import annotations

from privaudit.defences.base import Defence, Knob


class DPSGD(Defence):
    name = "dpsgd"
    tag = "dp-s"
    title = "DP-SGD"
    knob = Knob("noise multiplier", "σ", 0.0, 1e6, grid=(0.5, 1.0, 2.0), low_open=True, search_max=64.0,
                field="noise_multiplier")
    paper = "Abadi et al., Deep Learning with Differential Privacy (CCS 2016, arXiv 1607.00133)"
    formula = "g = (Σ_i clip_C(∇ℓ_i) + N(0, σ²C²)) / (qN), Poisson batches"
    mechanism = "dpsgd"


class NoisyCGD(DPSGD):
    name = "noisycgd"
    tag = "ncgd-s"
    title = "NoisyCGD"
    paper = "Ye & Shokri, Differentially Private Learning Needs Hidden State (arXiv 2203.05363)"
    formula = "cyclic batches, clipped gradient + N(0, σ²C²), last iterate released"
    mechanism = "noisycgd"


DEFENCE = DPSGD()
NOISYCGD = NoisyCGD()
