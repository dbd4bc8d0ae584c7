"""privaudit's Python API: each command of the command line as a function with the
command's options as keyword arguments, returning a result object (``to_dict()`` is the
command's ``--json``, ``to_json()`` the same as text; a notebook shows ``_repr_html_``).

- :func:`privaudit.audit` — train, attack and report a defence grid (``privaudit audit``);
- :func:`privaudit.train` — one target model with a defence (``privaudit train``);
- :func:`privaudit.attack` — attack trained targets (``privaudit attack``);
- :func:`privaudit.report` — rebuild the workspace's reports (``privaudit report``);
- :func:`privaudit.scan` — audit a model from its outputs, arrays or a file (``privaudit scan``);
- :func:`privaudit.export_logits` — a target's outputs as the file scan reads (``privaudit export-logits``);
- :func:`privaudit.audit_model` — audit a model trained elsewhere from its weights (``privaudit audit-model``);
- :func:`privaudit.epsilon` — the ε of a DP-SGD or NoisyCGD setting (``privaudit epsilon``);
- :func:`privaudit.theory` — the papers' theory as experiments (``privaudit theory``);
- :func:`privaudit.reproduce` — a paper's results, each statement checked (``privaudit reproduce``).

The options' values are checked in :mod:`privaudit.api.params`, which the command line's
callbacks share. Bad values raise :class:`privaudit.errors.ConfigError` with the command
line's one-line message; a damaged artifact raises :class:`privaudit.errors.ArtifactError`.
"""
