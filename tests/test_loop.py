"""The one training loop (privaudit.training.loop): every recipe trained through it gives, bit
for bit, the model of the explicit loop written out by hand for that recipe (the loops
privaudit had before they became one), and the loop itself reports what it should."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from privaudit.core.seeding import derive_seed, generator
from privaudit.models import build_model
from privaudit.models.fast_linear import fast_layers
from privaudit.training import loop, train_model
from privaudit.training.dp_engine import GaussianNoise, GhostDPSGD, dp_compute_threads, poisson_batch
from privaudit.training.mg_noise import mg_mask
from privaudit.training.results import role_data
from privaudit.training.trainer import channels_last, make_optimizer

CPU = torch.device("cpu")


def _fresh(cfg, data):
    torch.manual_seed(derive_seed(cfg.seed, cfg.role, "train"))
    model = build_model(cfg.model.name, data.input_shape, data.num_classes, width=cfg.model.width,
                        dp=cfg.defence.dp)
    return model, generator(derive_seed(cfg.seed, cfg.role, "mask"))


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("model,kappa", [("mlp", 0.0), ("mlp", 0.7), ("cnn", 0.5)])
def test_plain_training_is_the_explicit_loop(digits, tiny, model, kappa):
    """Shuffle, mask each batch from the same generator right after its indices, Adam step."""
    cfg = tiny(model=model, kappa=kappa, epochs=3)
    got = train_model(cfg, digits, CPU, engine="fast", stack=False)
    rd = role_data(cfg, digits, CPU)
    with torch.random.fork_rng():
        net, g = _fresh(cfg, digits)
        opt = make_optimizer(net, cfg, "fast")
        history = []
        with fast_layers(net), channels_last(net, CPU) as layout:
            for _ in range(cfg.train.epochs):
                net.train()
                perm, total = torch.randperm(len(rd.y_in), generator=g), torch.zeros(())
                for start in range(0, len(perm), cfg.train.batch_size):
                    idx = perm[start:start + cfg.train.batch_size]
                    xb = rd.x_in[idx]
                    if kappa:
                        xb = xb * mg_mask(xb.shape, kappa, g)
                    if layout is not None:
                        xb = xb.contiguous(memory_format=layout)
                    loss = nn.functional.cross_entropy(net(xb), rd.y_in[idx])
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total += loss.detach() * len(idx)
                history.append(float(total) / len(perm))
    assert _same(got.model, net) and got.loss_history == history


def test_dpsgd_training_is_the_explicit_loop(digits, tiny):
    """Poisson batch, pad, mask, one clipped noisy backward, Adam step."""
    cfg = tiny(model="mlp", kappa=0.3, dp=True, noise_multiplier=1.0, epochs=2, part_size=60, batch_size=20)
    got = train_model(cfg, digits, CPU, engine="fast", stack=False)
    rd = role_data(cfg, digits, CPU)
    n, q, steps = len(rd.y_in), 1 / 3, 3
    with torch.random.fork_rng():
        net, g = _fresh(cfg, digits)
        opt = make_optimizer(net, cfg, "fast")
        noise = GaussianNoise(derive_seed(cfg.seed, cfg.role, "dp-noise"), CPU)
        dp = GhostDPSGD(net, 1.0, 1.0, int(n * q), noise)
        with dp_compute_threads(CPU):
            for _ in range(cfg.train.epochs * steps):
                idx = poisson_batch(n, q, g, CPU)
                size = len(idx)
                if size:
                    idx = torch.cat([idx, idx.new_zeros(dp.padded_size(size) - size)])
                xb = rd.x_in[idx] * mg_mask(rd.x_in[idx].shape, 0.3, g)
                dp.compute_grads(xb, rd.y_in[idx], size)
                opt.step()
        noise.close()
    assert got.metrics["steps"] == cfg.train.epochs * steps
    assert _same(got.model, net)


def test_run_epochs_reports_mean_losses_and_applies_the_view_once_per_batch():
    x, y = torch.arange(10.0)[:, None], torch.zeros(10, dtype=torch.long)
    seen, reported = [], []

    def step(batch: loop.Batch, epoch: int):
        seen.append(batch.x.clone())
        return batch.x.sum(), batch.size

    history = loop.run_epochs(2, loop.shuffled(x, y, 4, generator(0)), step, view=lambda t: t * 2,
                              on_epoch=lambda e, n, v: reported.append((e, n, v)))
    assert history == [9.0, 9.0]                 # mean of 2 * (0..9)
    assert reported == [(1, 2, 9.0), (2, 2, 9.0)]
    assert [len(b) for b in seen] == [4, 4, 2, 4, 4, 2]
    assert sorted(torch.cat(seen[:3]).ravel().tolist()) == [2.0 * i for i in range(10)]  # each sample once
    # K models at once: one mean per model and epoch, their average reported
    stacked = loop.run_epochs(1, lambda: [loop.Batch(x, y, 10)], lambda b, e: (torch.tensor([10.0, 30.0]), b.size),
                              on_epoch=lambda e, n, v: reported.append(v))
    assert stacked == [[1.0, 3.0]] and reported[-1] == 2.0


def test_cyclic_batches_repeat_in_order():
    x, y = torch.arange(6.0), torch.arange(6)
    order = torch.tensor([[4, 1], [0, 5], [3, 2]])
    epochs = [[b.y.tolist() for b in loop.cyclic(x, y, order)()] for _ in range(2)]
    assert epochs[0] == epochs[1] == [[4, 1], [0, 5], [3, 2]]


@pytest.mark.parametrize("model", ["mlp", "cnn-improved-small"])  # dropout and BatchNorm in the second
def test_a_snapshot_is_the_shorter_run(digits, tiny, model):
    """The model after e epochs of a longer run is, bit for bit, the model of a run of e
    epochs, with the same metrics and loss history."""
    got = {}
    train_model(tiny(model=model, kappa=0.5, epochs=5), digits, CPU,
                snapshots={2: lambda r: got.setdefault(2, r), 4: lambda r: got.setdefault(4, r)})
    for e in (2, 4):
        alone = train_model(tiny(model=model, kappa=0.5, epochs=e), digits, CPU)
        assert _same(alone.model, got[e].model) and alone.loss_history == got[e].loss_history
        for key in ("train_accuracy", "test_accuracy", "train_loss", "test_loss"):
            assert alone.metrics[key] == got[e].metrics[key], key
        assert got[e].metrics["snapshot_of_epochs"] == 5
        assert all(type(m) is nn.Linear for m in got[e].model.modules() if isinstance(m, nn.Linear))
    with pytest.raises(Exception, match="non-private"):
        train_model(tiny(dp=True, noise_multiplier=1.0, epochs=3), digits, CPU, snapshots={1: print})


def test_an_epoch_series_trains_once_and_resumes(digits, tiny, tmp_path, monkeypatch):
    from privaudit.pipeline import runs
    from privaudit.pipeline.workspace import Workspace

    calls = []
    real = runs.train_model
    monkeypatch.setattr(runs, "train_model", lambda cfg, *a, **k: calls.append(cfg.train.epochs) or real(cfg, *a, **k))
    ws = Workspace(tmp_path).ensure_writable()
    series = [tiny(kappa=0.5, epochs=e) for e in (4, 2, 6)]
    assert runs.epoch_series(series) and not runs.epoch_series(series[:1])
    assert not runs.epoch_series([tiny(epochs=2), tiny(epochs=4, kappa=0.1)])
    first = runs.ensure_epochs(series, ws, runs.DataCache(), CPU)
    assert calls == [6] and [r.reused for r in first] == [False, False, False]
    again = runs.ensure_epochs(series, ws, runs.DataCache(), CPU)
    assert calls == [6] and all(r.reused for r in again)
    alone = train_model(tiny(kappa=0.5, epochs=4), digits, CPU)
    assert first[0].metrics["test_accuracy"] == alone.metrics["test_accuracy"]
    loaded = ws.load_model(series[0].run_name, digits.input_shape)
    assert _same(loaded.model, alone.model)


def test_the_reproductions_epoch_sweep_trains_each_recipe_once():
    from privaudit.reproduction import protocol
    from privaudit.reproduction.run import reproduce_jobs

    p = protocol("full", "cifar10", seeds=[0], families=["cnn"], experiments=["epochs"])
    jobs = reproduce_jobs(p, (3, 32, 32), 60_000)
    trains = [j for j in jobs if j.kind == "train"]
    assert len(trains) == 8 and all(j.epochs_series for j in trains)        # 4 kappas x target and shadow
    assert sorted(c.train.epochs for c in trains[0].configs) == [20, 40, 60, 80, 100, 120]
    position = {j.id: i for i, j in enumerate(jobs)}
    assert all(d in position and position[d] < position[j.id] for j in jobs for d in j.deps)
    assert len([j for j in jobs if j.kind == "attack"]) == 24
