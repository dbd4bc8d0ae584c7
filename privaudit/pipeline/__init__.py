"""The audit's steps over the config-hashed workspace (``workspace``): get or train a model
(``runs``), a reference pool's logits (``pools``), canaries (``canary``) and the attack of one
target (``attacking``). Each step is a get-or-compute, so an interrupted audit resumes."""
