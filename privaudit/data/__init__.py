"""Datasets, the ML-Leaks four-way split and per-model normalisation."""

from privaudit.data.loaders import DATA_DIR_ENV, ImageData, load_dataset
from privaudit.data.splits import PARTS, Normaliser, Split, split_parts

__all__ = ["DATA_DIR_ENV", "ImageData", "load_dataset", "PARTS", "Normaliser", "Split", "split_parts"]
