"""privaudit: membership-inference audits of image classifiers and their defences.

The library API mirrors the command line: every command builds a config and calls one
function of this package (``privaudit.runs.train_run``, ``privaudit.attacking.attack_target``,
``privaudit.audit.run_audit``, ``privaudit.report.build.build_reports``).
"""

__version__ = "0.1.0"
