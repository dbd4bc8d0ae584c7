"""Multiplicative Gaussian input noise ("MG noise"), knob κ.

Each training input is multiplied elementwise by a fresh mask c ~ N(1, κ²), per sample,
coordinate and step, on the normalised inputs (Kolomvaki et al., *Convergence Analysis of
Two-Layer Neural Networks under Gaussian Input Masking*, arXiv 2602.17423; docs/methods/a-mg-noise.md
A.1). The mask is drawn in one place, :func:`privaudit.training.loop.training_view`; the
config holds κ as the defence's knob (``DefenceConfig(name="mg", knob=κ)``).
"""

from __future__ import annotations

from privaudit.defences.base import Defence, Knob


class MGNoise(Defence):
    name = "mg"
    tag = "k"
    title = "MG noise"
    knob = Knob("kappa", "κ", 0.0, 100.0, grid=(0.25, 0.5, 1.0, 2.0), low_open=True, search_max=64.0,
                field="kappa")
    paper = ("Kolomvaki et al., Convergence Analysis of Two-Layer Neural Networks under Gaussian Input Masking "
             "(arXiv 2602.17423)")
    formula = "x ← x ⊙ c, c ~ N(1, κ²) per element and step"


DEFENCE = MGNoise()
