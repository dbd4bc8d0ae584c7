"""The papers' theory as runnable experiments (docs/methods/a-mg-noise.md A.2,
docs/methods/c-masked-neurons.md C): ``privaudit theory …``."""
