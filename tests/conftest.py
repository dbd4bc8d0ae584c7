"""Shared fixtures: the digits data, tiny run configs and trained models in temp workspaces.

Everything here is sized for a 2-core CPU: digits (8x8), parts of 40-120 images, small
widths, few epochs. Trained models that several tests read are session-scoped.
"""

from __future__ import annotations

import pytest
import torch

from privaudit.core.config import make_config
from privaudit.data import load_dataset
from privaudit.pipeline.runs import DataCache, ensure_model
from privaudit.pipeline.workspace import Workspace

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _no_data_dir_env(monkeypatch):
    """Tests never depend on the caller's ``$PRIVAUDIT_DATA_DIR``."""
    monkeypatch.delenv("PRIVAUDIT_DATA_DIR", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _data_cache_in_a_temp_folder(tmp_path_factory):
    """The decoded-dataset cache (privaudit.data.cache) of the whole run lives in a temporary
    folder, never in the user's ~/.cache (subprocesses inherit it)."""
    import os

    old = os.environ.get("PRIVAUDIT_CACHE_DIR")
    os.environ["PRIVAUDIT_CACHE_DIR"] = str(tmp_path_factory.mktemp("data-cache"))
    yield
    if old is None:
        os.environ.pop("PRIVAUDIT_CACHE_DIR", None)
    else:
        os.environ["PRIVAUDIT_CACHE_DIR"] = old


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    old = torch.get_num_threads()
    torch.set_num_threads(min(old, 2))
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def digits():
    """The pooled digits data: (1797, 1, 8, 8) uint8 values 0-16."""
    return load_dataset("digits")


@pytest.fixture(scope="session")
def data_cache(digits):
    """A DataCache that already holds digits (never touches the disk for CIFAR-10)."""
    cache = DataCache()
    cache._cache["digits"] = digits
    return cache


def tiny_config(**overrides):
    """A small, fast digits config; ``overrides`` go to :func:`make_config`."""
    kw = dict(model="mlp", dataset="digits", width=32, part_size=60, epochs=3, batch_size=20, seed=0)
    kw.update(overrides)
    return make_config(**kw)


@pytest.fixture(scope="session")
def tiny():
    """The :func:`tiny_config` factory, as a fixture."""
    return tiny_config


@pytest.fixture(scope="session")
def trained_mg(tmp_path_factory, data_cache):
    """An MLP trained with MG noise (kappa = 1) and saved in a workspace: (workspace, config, run)."""
    ws = Workspace(tmp_path_factory.mktemp("ws-mg")).ensure_writable()
    cfg = tiny_config(kappa=1.0, part_size=80, width=64, epochs=8, seed=3)
    run = ensure_model(cfg, ws, data_cache, CPU)
    return ws, cfg, run

