"""Reproductions of the papers' published results as one command (``privaudit reproduce``).

``mg-noise``: the CIFAR-10 protocol of the MG-noise paper (docs/methods/a-mg-noise.md A.3–A.5), its
Figures 4–7 and 9–10 and its epoch sweep, with every statement the paper makes about them
checked against the run (:mod:`.protocol`, :mod:`.run`, :mod:`.claims`, :mod:`.page`).
"""

from privaudit.reproduction.protocol import EXPERIMENTS, FAMILIES, SCALES, Protocol, protocol

__all__ = ["EXPERIMENTS", "FAMILIES", "SCALES", "Protocol", "protocol"]
