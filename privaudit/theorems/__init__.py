"""The papers' theory as runnable experiments (docs/methods.md A.2, C): ``privaudit theory …``."""
