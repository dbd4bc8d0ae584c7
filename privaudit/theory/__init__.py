"""The papers' theory as runnable experiments (papers.md A.2, C): ``privaudit theory …``."""
