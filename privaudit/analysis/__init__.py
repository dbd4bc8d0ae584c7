"""The maths the attacks and the report share: attack metrics (``metrics``), empirical ε lower
bounds (``empirical``), family-wise tests of several attacks or defences at once
(``familywise``), the DP accountants (``accounting``), hidden-state DP of NoisyCGD
(``hidden_state``) and the equal-accuracy matching of defences (``matching``)."""
