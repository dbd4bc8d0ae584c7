"""``privaudit scan``: every input format, checks that name the key, attacks with known answers,
and the same numbers as ``privaudit attack`` when fed privaudit's own logits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import one_error_line, run_cli, run_cli_joined
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from privaudit.analysis.empirical import bonferroni_thresholds
from privaudit.attacks.crossval import fold_ids, threshold_decisions
from privaudit.attacks.scores import modified_entropy_scores, softmax
from privaudit.errors import DataError
from privaudit.pipeline.attacking import AttackPlan, attack_target
from privaudit.pipeline.runs import ensure_model
from privaudit.pipeline.workspace import Workspace
from privaudit.scanning.export import export_arrays
from privaudit.scanning.inputs import check, load
from privaudit.scanning.run import scan

CPU = __import__("torch").device("cpu")
C = 10


def _logits(rng, labels, boost):
    """Gaussian logits with the true class raised by ``boost`` (per sample)."""
    z = rng.normal(size=(len(labels), C))
    z[np.arange(len(labels)), labels] += boost
    return z


def _arrays(n=300, gap=0.0, seed=0):
    """Members get their true class raised by ``gap`` more than non-members."""
    rng = np.random.default_rng(seed)
    y_in, y_out = rng.integers(0, C, n), rng.integers(0, C, n)
    return {"logits_in": _logits(rng, y_in, 1.0 + gap), "logits_out": _logits(rng, y_out, 1.0),
            "labels_in": y_in, "labels_out": y_out}


# -- known answers ------------------------------------------------------------------------------

@pytest.mark.slow
def test_random_outputs_give_chance_and_no_verdict():
    r = scan(check(_arrays(n=400, gap=0.0, seed=1)))
    for name, m in r.metrics.items():
        assert m["auc_lo"] <= 0.5 <= m["auc_hi"] or abs(m["auc"] - 0.5) < 0.06, (name, m)
        assert m["eps_lower_bound"] < 0.5, name
    assert {"loss", "confidence", "entropy", "modified-entropy", "classifier"} <= set(r.metrics)
    assert all(m["calibration"] == "cv" for m in r.metrics.values())


def test_separable_outputs_give_auc_one():
    a = _arrays(n=200, seed=2)
    a["logits_in"] = np.eye(C)[a["labels_in"]] * 30.0   # members: certain of the true class
    a["logits_out"] = np.zeros((200, C))                 # non-members: uniform
    r = scan(check(a))
    fold = fold_ids(r.membership, 5, 0)
    for name in ("loss", "confidence", "entropy", "modified-entropy", "classifier"):
        m = r.metrics[name]
        assert m["auc"] == pytest.approx(1.0), name
        assert m["precision"] == pytest.approx(1.0) and m["recall"] == pytest.approx(1.0), name
        assert m["tpr_at_0p1pct_fpr"] == pytest.approx(1.0), name
        # T label-free candidates (the scores' distinct values, up to float noise), each at
        # 1 − 0.05/T; the perfect one gives ln((1 − δ − FPR_hi) / FNR_hi), FNR_hi at 1 − 0.05/T/2
        # (the bound's union of its two rates). The classifier: each of 5 folds of 40 + 40 at
        # 1 − 0.05/5 with its own T, the largest fold's bound reported.
        groups = [fold == k for k in range(5)] if name == "classifier" else [np.ones(400, bool)]
        alphas = [0.05 / len(groups) / bonferroni_thresholds(r.scores[name][g]).size / 2 for g in groups]
        fnr_hi = 1 - max(alphas) ** (1 / (200 // len(groups)))
        assert m["eps_lower_bound"] == pytest.approx(np.log((1 - 1e-5 - fnr_hi) / fnr_hi), rel=1e-6), name
        assert m["eps_fpr"] == 0.0 and m["gdp_fpr"] == 0.0, name
        assert m["gdp_mu"] == pytest.approx(-2 * norm.ppf(fnr_hi), rel=1e-6), name
        assert m["threshold_strategy"].startswith("bonferroni within folds: each of 5 folds" if name == "classifier"
                                                  else "bonferroni: "), name


@pytest.mark.slow
def test_stronger_gap_leaks_more():
    aucs = [scan(check(_arrays(n=300, gap=g, seed=3))).metrics["loss"]["auc"] for g in (0.0, 1.0, 3.0)]
    assert aucs[0] < aucs[1] < aucs[2]
    assert aucs[2] > 0.8


def test_modified_entropy_matches_its_formula():
    rng = np.random.default_rng(4)
    z, y = rng.normal(size=(50, 6)) * 3, rng.integers(0, 6, 50)
    p = softmax(z)
    ref = [-(-(1 - p[i, y[i]]) * np.log(p[i, y[i]]) - sum(p[i, j] * np.log(1 - p[i, j]) for j in range(6) if j != y[i]))
           for i in range(50)]
    assert np.allclose(modified_entropy_scores(z, y), ref)


def test_cross_validated_thresholds_never_see_their_fold():
    labels = np.r_[np.ones(50), np.zeros(50)].astype(int)
    scores = np.r_[np.linspace(1, 2, 50), np.linspace(0, 1.5, 50)]
    fold = fold_ids(labels, 5, 0)
    d = threshold_decisions(labels, scores, fold)
    # a sample's decision does not change when its own label (and its fold's labels) flip
    flipped = labels.copy()
    flipped[fold == 0] = 1 - flipped[fold == 0]
    d2 = threshold_decisions(flipped, scores, fold)
    assert np.array_equal(d.member[fold == 0], d2.member[fold == 0])


@pytest.mark.slow
def test_lira_from_references_finds_what_the_references_show():
    """References drawn from the same generator as the target: LiRA must beat chance clearly."""
    rng = np.random.default_rng(5)
    n, m = 300, 8
    y = rng.integers(0, C, 2 * n)
    easy = rng.normal(size=2 * n)  # per-sample difficulty shared by every model
    keep = np.zeros((m, 2 * n), bool)
    for j in range(0, m, 2):
        k = rng.random(2 * n) < 0.5
        keep[j], keep[j + 1] = k, ~k

    def model(member):
        return _logits(rng, y, 1.0 + 3.0 * easy + 2.0 * member)

    target = model(np.r_[np.ones(n), np.zeros(n)])
    a = {"logits_in": target[:n], "logits_out": target[n:], "labels": y,
         "reference_logits": np.stack([model(keep[j].astype(float)) for j in range(m)]), "keep": keep}
    r = scan(check(a))
    assert r.inputs["reference_models"] == m
    for name in ("lira-online", "lira-offline", "rmia", "shadow-pool"):
        assert r.metrics[name]["calibration"] == "references"
        # the label-free many-shadow attack is confused by the per-sample difficulty
        assert r.metrics[name]["auc_lo"] > (0.5 if name == "shadow-pool" else 0.6), (name, r.metrics[name]["auc"])
    # the per-sample difficulty is what reference attacks correct for: LiRA beats the loss attack
    assert r.metrics["lira-online"]["auc_lo"] > r.metrics["loss"]["auc_hi"]


def test_target_index_layout_equals_explicit_layout():
    """The LiRA authors' layout (target = one row of the arrays) gives the same scores as the
    target given apart with the remaining rows as references."""
    rng = np.random.default_rng(6)
    m, n = 8, 120
    y = rng.integers(0, C, n)
    keep = np.argsort(rng.random((m, n)), axis=0) < m // 2  # each sample IN for exactly half of the models
    logits = np.stack([_logits(rng, y, 1.0 + 1.5 * keep[j]) for j in range(m)])
    r1 = scan(check({"reference_logits": logits, "keep": keep, "labels": y, "target_index": np.int64(0)}))
    order = np.r_[np.flatnonzero(keep[0]), np.flatnonzero(~keep[0])]
    inside = keep[0]
    r2 = scan(check({"logits_in": logits[0][inside], "logits_out": logits[0][~inside], "labels": y[order],
                     "reference_logits": logits[1:][:, order], "keep": keep[1:][:, order]}))
    for name in ("lira-online", "lira-offline-global", "rmia", "loss"):
        assert np.allclose(r1.scores[name], r2.scores[name]), name
        assert r1.metrics[name]["auc"] == pytest.approx(r2.metrics[name]["auc"]), name


@pytest.mark.slow
def test_probabilities_and_logits_agree():
    a = _arrays(n=150, gap=1.0, seed=7)
    p = {"probs_in": softmax(a["logits_in"]), "probs_out": softmax(a["logits_out"]),
         "labels_in": a["labels_in"], "labels_out": a["labels_out"]}
    r1, r2 = scan(check(a)), scan(check(p))
    for name in ("loss", "confidence", "entropy", "modified-entropy", "classifier"):
        assert r1.metrics[name]["auc"] == pytest.approx(r2.metrics[name]["auc"], abs=1e-9), name


def test_losses_only_run_the_loss_attack():
    rng = np.random.default_rng(8)
    r = scan(check({"loss_in": rng.exponential(0.5, 200), "loss_out": rng.exponential(1.5, 200)}))
    assert list(r.metrics) == ["loss"]
    assert r.metrics["loss"]["auc"] > 0.6
    assert "classifier" in r.skipped and "lira-online" in r.skipped


def test_slices_and_classes_give_per_group_auc():
    a = _arrays(n=200, gap=2.0, seed=9)
    a["slices_in"] = np.where(np.arange(200) % 2, "odd", "even")
    a["slices_out"] = np.where(np.arange(200) % 2, "odd", "even")
    r = scan(check(a))
    g = r.groups[(r.groups.attack == "loss")]
    assert set(g[g.grouping == "slice"].group) == {"odd", "even"}
    assert set(g[g.grouping == "class"].group) <= {str(c) for c in range(C)}
    one = g[(g.grouping == "class") & (g.group == "3")].iloc[0]
    sel = np.r_[a["labels_in"], a["labels_out"]] == 3
    member = np.r_[np.ones(200), np.zeros(200)][sel]
    assert one.auc == pytest.approx(roc_auc_score(member, r.scores["loss"][sel]))
    assert one.auc_lo < one.auc < one.auc_hi


@pytest.mark.slow
def test_same_seed_same_numbers():
    a = _arrays(n=150, gap=1.0, seed=10)
    r1, r2 = scan(check(a), seed=4), scan(check(a), seed=4)
    assert json.dumps(r1.metrics, sort_keys=True) == json.dumps(r2.metrics, sort_keys=True)
    assert r1.metrics["classifier"]["auc"] != scan(check(a), seed=5).metrics["classifier"]["auc"]


# -- input formats ----------------------------------------------------------------------------

@pytest.mark.slow
def test_npz_npy_folder_and_csv_read_the_same(tmp_path):
    a = _arrays(n=60, gap=1.0, seed=11)
    np.savez(tmp_path / "out.npz", **a)
    folder = tmp_path / "npy"
    folder.mkdir()
    for k, v in a.items():
        np.save(folder / f"{k}.npy", v)
    logits = np.r_[a["logits_in"], a["logits_out"]]
    frame = pd.DataFrame(logits, columns=[f"logit_{i}" for i in range(C)])
    frame.insert(0, "label", np.r_[a["labels_in"], a["labels_out"]])
    frame.insert(0, "member", np.r_[np.ones(60, int), np.zeros(60, int)])
    frame = frame.sample(frac=1.0, random_state=0)  # any row order
    frame.to_csv(tmp_path / "out.csv", index=False)
    aucs = []
    for path in (tmp_path / "out.npz", folder, tmp_path / "out.csv"):
        inp = load(path)
        assert (inp.members.n, inp.nonmembers.n, inp.num_classes) == (60, 60, C)
        aucs.append(scan(inp).metrics["loss"]["auc"])
    assert aucs[0] == pytest.approx(aucs[1]) and aucs[0] == pytest.approx(aucs[2])


@pytest.mark.parametrize("change, key", [
    (lambda a: a.pop("labels_in"), "labels_in"),
    (lambda a: a.update(logits_out=np.zeros((40, C + 1))), "logits_out"),
    (lambda a: a["logits_in"].__setitem__((0, 0), np.nan), "logits_in"),
    (lambda a: a.update(labels_out=a["labels_out"] + 20), "labels_out"),
    (lambda a: a.update(labels_in=a["labels_in"][:-1]), "labels_in"),
    (lambda a: a.update(logits_out=np.array(["x"] * 40)), "logits_out"),
    (lambda a: a.update(probs_in=np.full((40, C), 0.5)), "probs_in"),
    (lambda a: a.update(reference_logits=np.zeros((4, 80, C))), "keep"),
    (lambda a: a.update(reference_logits=np.zeros((4, 79, C)), keep=np.zeros((4, 79), bool)), "reference_logits"),
    (lambda a: a.update(target_index=np.int64(0)), "target_index"),
    (lambda a: a.update(slices_in=np.zeros(40)), "slices_out"),
])
def test_bad_arrays_name_the_key(change, key):
    a = _arrays(n=40, seed=12)
    change(a)
    with pytest.raises(DataError) as exc:
        check(a)
    assert str(exc.value).startswith(key), str(exc.value)


def test_pickled_objects_are_refused(tmp_path):
    a = _arrays(n=20, seed=13)
    a["labels_in"] = np.array([object()] * 20, dtype=object)
    np.savez(tmp_path / "evil.npz", **a)  # np.savez pickles object arrays
    code, out = run_cli_joined("scan", str(tmp_path / "evil.npz"), "--out", str(tmp_path / "r"))
    assert code == 2
    line = one_error_line(out)
    assert line.startswith("error: labels_in: holds Python objects, which privaudit does not load (unsafe)")
    assert "allow_pickle" not in out  # never advice to load it unsafely
    assert not (tmp_path / "r").exists()


def test_cli_writes_the_report(tmp_path):
    a = _arrays(n=150, gap=2.0, seed=14)
    a["slices"] = np.r_[np.arange(150) % 3, np.arange(150) % 3]
    a["unrelated"] = np.zeros(3)
    np.savez(tmp_path / "model.npz", **a)
    code, out, err = run_cli("scan", str(tmp_path / "model.npz"), "--out", str(tmp_path / "rep"), "--json")
    assert code == 0, err
    summary = json.loads(out)
    folder = tmp_path / "rep"
    for f in ("attacks.csv", "groups.csv", "scores.npz", "roc.svg", "summary.json", "index.html"):
        assert (folder / f).is_file(), f
    table = pd.read_csv(folder / "attacks.csv")
    assert table.attack.iloc[0] == summary["headline"]["strongest"]
    assert summary["inputs"]["ignored_keys"] == ["unrelated"]
    assert summary["headline"]["attacks_above_chance"]
    html = (folder / "index.html").read_text()
    assert "At a glance" in html and "AUC per slice" in html and "http://" not in html.replace("http://www.w3.org", "")
    with np.load(folder / "scores.npz", allow_pickle=False) as npz:
        assert npz["membership"].sum() == 150


def test_cli_default_folder_and_bad_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "m.npz", **_arrays(n=30, seed=15))
    code, out = run_cli_joined("scan", "m.npz")
    assert code == 0, out
    assert (tmp_path / "reports" / "scan" / "m" / "index.html").is_file()
    code, out = run_cli_joined("scan", "missing.npz")
    assert code == 2 and "does not exist" in one_error_line(out)


# -- the same numbers as privaudit attack -------------------------------------------------------

@pytest.fixture(scope="module")
def attacked(tmp_path_factory, data_cache, tiny):
    """A digits target attacked by privaudit with the shadow trio and a pool of 4."""
    ws = Workspace(tmp_path_factory.mktemp("scan-ws")).ensure_writable()
    cfg = tiny(part_size=80, width=96, epochs=25, batch_size=20, seed=6)
    target = ensure_model(cfg, ws, data_cache, CPU)
    result = attack_target(ws, target.name, data_cache, CPU,
                           AttackPlan.from_choices(["shadow", "loss", "lira", "rmia"], 4))
    return ws, target, result


def test_scan_of_exported_logits_equals_attack(attacked, data_cache, tmp_path):
    ws, target, result = attacked
    arrays = export_arrays(ws, target.name, data_cache, CPU, pool_size=4)
    r = scan(check(arrays))
    for name in ("shadow", "loss", "confidence", "lira-online", "lira-offline", "lira-online-global", "rmia",
                 "shadow-pool"):
        want, got = result.metrics[name], r.metrics[name]
        for key in ("auc", "auc_lo", "auc_hi", "precision", "recall", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr",
                    "eps_lower_bound"):
            assert got[key] == pytest.approx(want[key], abs=1e-12), (name, key)


def test_export_logits_cli_and_scan_round_trip(attacked, tmp_path, monkeypatch):
    ws, target, result = attacked
    out = tmp_path / "t.npz"
    code, text = run_cli_joined("export-logits", target.name, "--out", str(out), "--workdir", str(ws.root))
    assert code == 0, text
    code, stdout, err = run_cli("scan", str(out), "--out", str(tmp_path / "rep"), "--json")
    assert code == 0, err
    got = json.loads(stdout)["metrics"]
    assert got["shadow"]["auc"] == pytest.approx(result.metrics["shadow"]["auc"], abs=1e-12)
    code, text = run_cli_joined("export-logits", target.name, "--out", str(tmp_path / "p.npz"), "--pool-size", "8",
                                "--workdir", str(ws.root))
    assert code == 2 and "no pool of 8" in one_error_line(text)


# -- audit-model: a model trained elsewhere ------------------------------------------------------

def _write_safetensors(path, tensors):
    """A minimal safetensors writer (the format's spec), for the reader's test."""
    import struct

    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.numpy().tobytes()
        header[name] = {"dtype": {"float32": "F32", "int64": "I64"}[str(t.numpy().dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_weights_files_load_safely(tmp_path):
    import pickle

    import torch

    from privaudit.models.weights_file import read_state_dict

    state = {"1.weight": torch.randn(4, 3), "1.bias": torch.randn(4)}
    _write_safetensors(tmp_path / "w.safetensors", state)
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}}, tmp_path / "w.pt")
    for f in ("w.safetensors", "w.pt"):
        got = read_state_dict(tmp_path / f)
        assert set(got) == set(state) and all(torch.equal(got[k], state[k]) for k in state), f

    class Evil:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    with open(tmp_path / "evil.pt", "wb") as fh:
        pickle.dump({"1.weight": Evil()}, fh)
    torch.save(torch.nn.Linear(3, 4), tmp_path / "whole_model.pt")  # a full pickle of a module
    for f in ("evil.pt", "whole_model.pt"):
        with pytest.raises(DataError, match="needs a full pickle"):
            read_state_dict(tmp_path / f)
    assert not (tmp_path / "pwned").exists()


@pytest.fixture(scope="module")
def external_model(tmp_path_factory, digits):
    """An MLP trained by a plain PyTorch loop (not privaudit) on 300 digits, saved as a state dict."""
    import torch
    from torch import nn

    folder = tmp_path_factory.mktemp("external")
    members = np.random.default_rng(0).choice(len(digits.y), 300, replace=False)
    x = torch.from_numpy(digits.x[members].astype(np.float32) / 255.0)
    y = torch.from_numpy(digits.y[members])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        for i in range(0, 300, 50):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x[i:i + 50]), y[i:i + 50]).backward()
            opt.step()
    torch.save(model.state_dict(), folder / "mlp.pt")
    np.save(folder / "members.npy", members)
    return folder


@pytest.mark.slow
def test_audit_model_end_to_end(external_model):
    folder = external_model
    args = ("audit-model", "--weights", str(folder / "mlp.pt"), "--model", "mlp", "--width", "128", "--dataset",
            "digits", "--members", str(folder / "members.npy"), "--references", "4", "--epochs", "60",
            "--batch-size", "50", "--lr", "0.01", "--workdir", str(folder / "ws"), "--json")
    code, out, err = run_cli(*args)
    assert code == 0, err
    doc = json.loads(out)
    m = doc["metrics"]
    assert {"loss", "lira-offline", "lira-offline-global", "rmia", "classifier"} <= set(m)
    assert "lira-online" in doc["skipped"] and "shadow-pool" in doc["skipped"]
    # digits are easy (test accuracy ~0.95), so the loss attack finds little; the references find more
    assert m["lira-offline"]["auc_lo"] > 0.5 and m["lira-offline"]["auc"] > m["loss"]["auc"]
    refs = doc["references"]
    assert refs["target_train_accuracy"] > 0.95 and abs(refs["accuracy_gap"]) < 0.15
    assert doc["inputs"]["reference_models"] == 4 and doc["inputs"]["members"] == 300
    html = Path(doc["html"]).read_text()
    assert "Reference models" in html
    # rerun: the references' logits are reused, the numbers are the same
    code, out2, err = run_cli(*args)
    assert code == 0, err
    assert json.loads(out2)["metrics"]["lira-offline"]["auc"] == m["lira-offline"]["auc"]


def test_audit_model_refuses_bad_input(external_model, tmp_path):
    folder = external_model
    base = ("audit-model", "--model", "mlp", "--width", "128", "--dataset", "digits", "--workdir", str(tmp_path))
    code, out = run_cli_joined(*base, "--weights", str(folder / "mlp.pt"), "--members", "0:5000")
    assert code == 2 and "--members" in one_error_line(out)
    code, out = run_cli_joined(*base, "--weights", str(folder / "missing.pt"), "--members", "0:300")
    assert code == 2 and "does not exist" in one_error_line(out)
    code, out = run_cli_joined("audit-model", "--model", "mlp", "--width", "64", "--dataset", "digits",
                               "--weights", str(folder / "mlp.pt"), "--members", "0:300", "--workdir", str(tmp_path))
    assert code == 2 and "has shape (128, 64)" in one_error_line(out)


def test_data_free_attack_is_ml_leaks_adversary_3(attacked, data_cache):
    """Top posterior thresholded at the 90th percentile of the model's top posterior on random
    images: same ranking as the confidence attack, its own threshold, no data used."""
    from privaudit.pipeline.attacking import DATA_FREE_PERCENTILE, data_free_threshold

    ws, target, result = attacked
    m, conf = result.metrics["data-free"], result.metrics["confidence"]
    assert m["auc"] == conf["auc"] and m["tpr_at_0p1pct_fpr"] == conf["tpr_at_0p1pct_fpr"]
    thr = data_free_threshold(ws, target.name, data_cache, CPU)
    assert m["threshold"] == pytest.approx(thr) and 0 < thr < 1 and DATA_FREE_PERCENTILE == 90.0
    assert thr == data_free_threshold(ws, target.name, data_cache, CPU)  # seeded
    with np.load(result.path / "scores.npz", allow_pickle=False) as npz:
        s, labels = npz["score_data-free"], npz["labels"]
    assert m["recall"] == pytest.approx(float((s[labels == 1] >= thr).mean()))
