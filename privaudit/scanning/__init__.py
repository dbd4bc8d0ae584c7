"""``privaudit scan``: membership-inference audit of a model from its outputs alone (docs/scan.md)."""
