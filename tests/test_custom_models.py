"""The user's own architectures: torchvision:NAME and module:MODULE:CALLABLE, built, trained,
saved and reloaded, Opacus's fixes under DP-SGD reported, and bad factories refused in one line."""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest
import torch
from cli_helpers import one_error_line, run_cli, run_cli_joined
from torch import nn

from privaudit.core.config import make_config
from privaudit.errors import ConfigError
from privaudit.models import build_model

FACTORY = textwrap.dedent('''
    import torch
    from torch import nn


    def make_net(num_classes, input_shape, hidden=32, norm=False):
        c, h, w = input_shape
        layers = [nn.Conv2d(c, 8, 3, padding=1)]
        if norm:
            layers.append(nn.BatchNorm2d(8))
        layers += [nn.ReLU(), nn.Flatten(), nn.Linear(8 * h * w, hidden), nn.ReLU(), nn.Linear(hidden, num_classes)]
        return nn.Sequential(*layers)


    def wrong_shape(**kwargs):
        return nn.Flatten()


    def not_a_module():
        return 42
''')


@pytest.fixture
def factory_dir(tmp_path, monkeypatch):
    """A folder holding a factory module (a fresh module name per test) as the current folder."""
    name = f"usernets_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path, name


def test_torchvision_resnet_with_small_stem_on_grey_images():
    torch.manual_seed(0)
    m = build_model("torchvision:resnet18", (1, 8, 8), 10, args='{"small_stem":true}')
    assert m(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    resnet = m[1]
    assert (resnet.conv1.kernel_size == (3, 3) and resnet.conv1.stride == (1, 1)
            and isinstance(resnet.maxpool, nn.Identity))
    plain = build_model("torchvision:resnet18", (3, 32, 32), 100)
    assert plain.conv1.kernel_size == (7, 7) and plain.fc.out_features == 100


def test_torchvision_errors_are_config_errors():
    with pytest.raises(ConfigError, match="no such model"):
        build_model("torchvision:resnet9000", (3, 32, 32), 10)
    with pytest.raises(ConfigError, match="small_stem"):
        build_model("torchvision:vgg11", (3, 32, 32), 10, args='{"small_stem":true}')


def test_dp_fix_replaces_batchnorm_and_says_so():
    torch.manual_seed(0)
    m = build_model("torchvision:resnet18", (3, 16, 16), 10, dp=True, args='{"small_stem":true}')
    assert not any(isinstance(x, nn.BatchNorm2d) for x in m.modules())
    assert any("BatchNorm2d → GroupNorm" in note for note in m.privaudit_notes)


def test_config_hash_covers_factory_and_arguments():
    a = make_config(model="module:nets:make", dataset="digits", model_args={"hidden": 16})
    b = make_config(model="module:nets:make", dataset="digits", model_args={"hidden": 32})
    assert a.config_hash != b.config_hash and a.run_name.startswith("target-mod-make-digits-")
    assert a.model.width == 0 and json.loads(a.model.args) == {"hidden": 16}
    with pytest.raises(ConfigError, match="`width`"):
        make_config(model="torchvision:resnet18", width=64)
    with pytest.raises(ConfigError, match="`model_args`"):
        make_config(model="mlp", model_args={"x": 1})


def test_factory_module_trains_saves_and_records_its_source(factory_dir):
    folder, name = factory_dir
    code, out, err = run_cli("train", "--dataset", "digits", "--model", f"module:{name}:make_net",
                             "--model-arg", "hidden=16", "--epochs", "3", "--part-size", "80", "--workdir", "ws",
                             "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["metrics"]["test_accuracy"] > 0.3  # it learned: 10 classes, chance 0.1
    saved = json.loads((folder / "ws" / "models" / doc["run"] / "config.json").read_text())
    want = hashlib.sha256((folder / f"{name}.py").read_bytes()).hexdigest()
    assert json.dumps(saved).count(want) == 1  # the factory's source hash, in the provenance
    # reloaded through the same factory, and attacked (named by its architecture, like a built-in one)
    code, text = run_cli_joined("attack", "--target", f"module:{name}:make_net", "--attacks", "shadow", "--workdir",
                                "ws", "--no-report")
    assert code == 0, text


def test_factory_under_dp_sgd_gets_opacus_fix(factory_dir):
    _, name = factory_dir
    code, out, err = run_cli("train", "--dataset", "digits", "--model", f"module:{name}:make_net",
                             "--model-arg", "norm=true", "--dp", "--noise-multiplier", "1", "--epochs", "1",
                             "--part-size", "60", "--workdir", "ws", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["metrics"]["model_changes"] == ["DP-SGD: 1 BatchNorm2d → GroupNorm (Opacus ModuleValidator.fix)"]
    assert doc["metrics"]["epsilon"] > 0


@pytest.mark.parametrize("spec, message", [
    ("module:{name}:wrong_shape", "must return logits of shape"),
    ("module:{name}:not_a_module", "not a torch.nn.Module"),
    ("module:{name}:missing", "has no callable"),
    ("module:no_such_module_anywhere:f", "cannot import"),
])
def test_bad_factories_are_one_line(factory_dir, spec, message):
    _, name = factory_dir
    code, out = run_cli_joined("train", "--dataset", "digits", "--model", spec.format(name=name), "--epochs", "1",
                               "--workdir", "ws")
    assert code == 2 and message in one_error_line(out)


@pytest.mark.parametrize("value", ["torchvision:", "module:x", "module::f", "resnet"])
def test_model_option_refuses_malformed_names(value):
    code, out = run_cli_joined("train", "--model", value)
    assert code == 2 and "--model" in one_error_line(out)
