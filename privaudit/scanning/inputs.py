"""What ``privaudit scan`` reads: arrays of model outputs from any framework, checked.

Three containers hold the same keys (docs/scan.md):

* an ``.npz`` archive, read with ``allow_pickle=False`` (an object array is refused, nothing
  is unpickled);
* a folder of ``KEY.npy`` files, read the same way;
* a CSV with one row per audited sample: ``member`` (1/0), ``label``, then either
  ``logit_0 … logit_{C-1}``, ``prob_0 … prob_{C-1}`` or ``loss``, and optionally ``slice``.

The audited model's outputs on its members (``*_in``) and non-members (``*_out``):
``logits_*`` (n, C) or (n, A, C) for A queries per sample (query 0 the plain input), or
``probs_*`` (softmax outputs, turned into logits as log p), or ``loss_*`` (n,); with
``labels_*`` (n,) and optionally ``slices_*`` (n,) (any integer or string grouping).

Optional, for stronger attacks:

* ``shadow_logits_in/out`` (or ``shadow_probs_*``) with ``shadow_labels_in/out``: a shadow
  model's outputs on its own members and non-members (the ML-Leaks shadow attack);
* ``reference_logits`` (M, N, C) or (M, N, A, C) (or ``reference_probs``), ``keep`` (M, N)
  bool: M reference models on the same N = n_in + n_out samples, members first, and which
  of them each reference trained on (LiRA, RMIA, the many-shadow attack). ``labels`` (N)
  may be given instead of ``labels_in``/``labels_out``. With ``target_index`` (a scalar),
  the audited model is row ``target_index`` of the reference arrays itself (the layout of
  the LiRA authors' code) and its members are ``keep[target_index]``; then no ``*_in`` /
  ``*_out`` output arrays are given;
* ``population_logits`` (Z, …), ``reference_population_logits`` (M, Z, …) and
  ``population_labels`` (Z): samples no model trained on, RMIA's population.

Every array is checked for presence, shape, dtype, NaN/inf and range; a problem is one
:class:`~privaudit.errors.DataError` naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, overload

import numpy as np

from privaudit.errors import DataError, brief
from privaudit.files.npfiles import load_npy, npz_member, open_npz
from privaudit.scanning import require_input

OUTPUT_KINDS = ("logits", "probs", "loss")
KNOWN_KEYS = frozenset(
    [f"{kind}_{side}" for kind in OUTPUT_KINDS for side in ("in", "out")]
    + [f"{k}_{side}" for k in ("labels", "slices") for side in ("in", "out")]
    + [f"shadow_{k}_{side}" for k in ("logits", "probs", "labels") for side in ("in", "out")]
    + ["reference_logits", "reference_probs", "keep", "labels", "target_index", "slices",
       "population_logits", "population_probs", "reference_population_logits", "reference_population_probs",
       "population_labels"])
PROB_SUM_TOLERANCE = 1e-3
MIN_PER_SIDE = 2  # members and non-members a scan needs at least (its folds and intervals)
LOG_FLOOR = 1e-300  # log(0) → log(1e-300): a probability that underflowed stays finite


@dataclass
class Outputs:
    """One model's outputs on some samples: ``logits`` (n, A, C) float64 (from logits or log
    probabilities) or, with only losses, ``loss`` (n,); ``labels`` (n,) int64 or None."""

    logits: np.ndarray | None
    loss: np.ndarray | None
    labels: np.ndarray | None
    key: str = ""          #: the array they were read from, as the user named it (e.g. ``logits_in``)
    shape: tuple = ()      #: that array's shape as the user gave it (messages speak of it, not of (n, A, C))

    @property
    def n(self) -> int:
        outputs = self.logits if self.logits is not None else self.loss
        assert outputs is not None  # every Outputs holds logits or losses (_read_outputs)
        return len(outputs)

    @property
    def plain(self) -> np.ndarray:
        """Logits of query 0 (the plain input), (n, C)."""
        assert self.logits is not None  # read only from outputs given as logits or probabilities
        return self.logits[:, 0]


@dataclass
class References:
    """M reference models on the audited samples (and optionally a population)."""

    logits: np.ndarray            # (M, N, A, C)
    keep: np.ndarray              # (M, N) bool
    pop_logits: np.ndarray | None = None       # (M, Z, A, C)
    target_pop_logits: np.ndarray | None = None  # (Z, A, C)
    pop_labels: np.ndarray | None = None       # (Z,)

    @property
    def paired(self) -> bool:
        """True when the references come in complementary pairs (2j, 2j+1), as privaudit's
        pools store them (then leave-one-out drops a model's partner with it)."""
        m = len(self.keep)
        return m % 2 == 0 and bool(np.all(self.keep[0::2] == ~self.keep[1::2]))


@dataclass
class ScanInput:
    """The checked contents of a scan input. ``members`` then ``non-members`` everywhere."""

    source: str
    members: Outputs
    nonmembers: Outputs
    slices: np.ndarray | None = None          # (n_in + n_out,) str, or None
    shadow: tuple[Outputs, Outputs] | None = None
    references: References | None = None
    ignored: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """What the audited model's outputs are: ``logits`` (or probabilities) or ``loss``."""
        return "loss" if self.members.logits is None else "logits"

    @property
    def membership(self) -> np.ndarray:
        """1 for members, 0 for non-members, (N,) int8."""
        return np.concatenate([np.ones(self.members.n, np.int8), np.zeros(self.nonmembers.n, np.int8)])

    @property
    def labels(self) -> np.ndarray | None:
        if self.members.labels is None:
            return None
        return np.concatenate([self.members.labels, self.nonmembers.labels])

    @property
    def given_as(self) -> str:
        """What the input held for the audited model, as the user gave it: ``logits``,
        ``probabilities`` (read as log-probabilities, logits up to a constant) or ``losses``."""
        if self.members.logits is None:
            return "losses"
        return "probabilities" if "probs" in self.members.key.split("_") else "logits"

    @property
    def num_classes(self) -> int | None:
        return None if self.members.logits is None else int(self.members.logits.shape[-1])

    def describe(self) -> dict:
        d = {"source": self.source, "members": self.members.n, "non_members": self.nonmembers.n,
             "outputs": self.given_as, "classes": self.num_classes,
             "queries": None if self.members.logits is None else int(self.members.logits.shape[1]),
             "slices": None if self.slices is None else int(len(np.unique(self.slices))),
             "shadow": self.shadow is not None,
             "reference_models": 0 if self.references is None else int(len(self.references.keep)),
             "population": None if self.references is None or self.references.pop_logits is None
             else int(self.references.pop_logits.shape[1])}
        if self.ignored:
            d["ignored_keys"] = list(self.ignored)
        return d


# -- reading the containers ------------------------------------------------------------------

def read_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz``, a folder of ``.npy`` or a CSV, by key; never unpickles."""
    p = require_input(path)
    if p.is_dir():
        files = sorted(p.glob("*.npy"))
        if not files:
            raise DataError(f"{p} holds no .npy files (expected one per key, e.g. logits_in.npy)")
        return {f.stem: _load_npy(f, f.stem) for f in files}
    suffix = p.suffix.lower()
    if suffix == ".npz":
        return _read_npz(p)
    if suffix == ".npy":
        raise DataError(f"{p} is a single .npy file; give an .npz, a folder of .npy files (one per key) or a CSV")
    if suffix in (".csv", ".tsv", ".txt"):
        return _read_csv(p)
    raise DataError(f"{p}: unknown scan input format {suffix or '(no suffix)'!r}; expected .npz, .csv or a folder of "
                    ".npy")


def _load_npy(path: Path, key: str) -> np.ndarray:
    return load_npy(path, key)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with open_npz(path, str(path)) as npz:
        return {key: npz_member(npz, key, path.name) for key in npz.files}


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    """One row per audited sample: member, label, logit_*/prob_*/loss, slice."""
    import pandas as pd

    try:
        frame = pd.read_csv(path, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a readable CSV ({brief(exc)})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if "member" not in frame:
        raise DataError(f"{path.name}: no 'member' column (1 = member, 0 = non-member)")
    member = pd.to_numeric(frame["member"], errors="coerce").to_numpy()
    if np.isnan(member).any() or not np.all((member == 0) | (member == 1)):
        raise DataError(f"member: every row must be 1 (member) or 0 (non-member) in {path.name}")
    member = member.astype(bool)
    if min(member.sum(), (~member).sum()) < MIN_PER_SIDE:
        raise DataError(f"member: {path.name} has {int(member.sum())} member rows and {int((~member).sum())} "
                        f"non-member rows; a scan needs at least {MIN_PER_SIDE} of each")
    out: dict[str, np.ndarray] = {}
    for prefix, kind in (("logit_", "logits"), ("prob_", "probs")):
        cols = [c for c in frame.columns if c.startswith(prefix)]
        if cols:
            idx = sorted(cols, key=lambda c: _column_index(c, prefix, path.name))
            if [_column_index(c, prefix, path.name) for c in idx] != list(range(len(idx))):
                raise DataError(f"{kind}: columns {prefix}0 … {prefix}{len(idx) - 1} must all be present in "
                                f"{path.name}")
            values = frame[idx].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float64)
            out[f"{kind}_in"], out[f"{kind}_out"] = values[member], values[~member]
    if "loss" in frame:
        values = pd.to_numeric(frame["loss"], errors="coerce").to_numpy(dtype=np.float64)
        out["loss_in"], out["loss_out"] = values[member], values[~member]
    if "label" in frame:
        labels = pd.to_numeric(frame["label"], errors="coerce").to_numpy()
        out["labels_in"], out["labels_out"] = labels[member], labels[~member]
    if "slice" in frame:
        slices = frame["slice"].astype(str).to_numpy()
        out["slices_in"], out["slices_out"] = slices[member], slices[~member]
    return out


def _column_index(column: str, prefix: str, name: str) -> int:
    tail = column[len(prefix):]
    if not tail.isdigit():
        raise DataError(f"{column}: expected {prefix}<class index> in {name}")
    return int(tail)


# -- checking -------------------------------------------------------------------------------

def _numeric(key: str, a: np.ndarray) -> np.ndarray:
    if a.dtype.kind not in "biuf":
        raise DataError(f"{key}: expected numbers, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if np.isnan(a).any():
        raise DataError(f"{key}: contains NaN ({int(np.isnan(a).sum())} values)")
    if np.isinf(a).any():
        raise DataError(f"{key}: contains ±inf ({int(np.isinf(a).sum())} values)")
    return a


def _outputs_array(key: str, a: np.ndarray, kind: str, lead: int, axes: str | None = None) -> np.ndarray:
    """Logits or probabilities as float64 logits with ``lead`` leading axes (named ``axes``:
    ``n`` for one model's samples, ``MN`` for M reference models on N samples), then (A, C).
    Every message gives the array's shape as the user gave it, never the (…, A, C) it is
    turned into here."""
    shape = tuple(a.shape)
    axes = axes or ("n" if lead == 1 else "MN")
    a = _numeric(key, a)
    if a.ndim not in (lead + 1, lead + 2):
        want = " or ".join(f"({', '.join([*axes, *extra])})" for extra in (("C",), ("A", "C")))
        raise DataError(f"{key}: expected {lead + 1} or {lead + 2} dimensions, e.g. {want}; got shape {shape}")
    if shape[-1] < 2:
        raise DataError(f"{key}: needs at least 2 classes in the last axis, got shape {shape}")
    if lead == 2 and shape[0] == 0:
        raise DataError(f"{key}: has 0 models in its first axis (shape {shape})")
    if shape[lead - 1] == 0:
        where = "rows" if lead == 1 else "samples in its second axis"
        raise DataError(f"{key}: has 0 {where} (shape {shape}); it needs the outputs of at least one sample, "
                        "one row per sample")
    if 0 in shape:
        raise DataError(f"{key}: has 0 queries per sample (shape {shape})")
    if a.ndim == lead + 1:
        a = a[..., None, :]
    if kind == "probs":
        if np.any(a < 0) or np.any(a > 1):
            raise DataError(f"{key}: probabilities must lie in [0, 1]")
        sums = a.sum(axis=-1)
        if np.any(np.abs(sums - 1) > PROB_SUM_TOLERANCE):
            worst = float(sums.ravel()[np.argmax(np.abs(sums - 1).ravel())])
            raise DataError(f"{key}: each row of probabilities must sum to 1 (one sums to {worst:.4g}); "
                            "pass logits as logits_* instead")
        a = np.log(np.maximum(a, LOG_FLOOR))
    return a


def _labels(key: str, a: np.ndarray, n: int, classes: int | None) -> np.ndarray:
    if a.ndim != 1 or len(a) != n:
        raise DataError(f"{key}: expected shape ({n},), got {a.shape}")
    a = _numeric(key, a)
    if np.any(a != np.round(a)):
        raise DataError(f"{key}: class labels must be integers")
    a = a.astype(np.int64)
    if n and a.min() < 0:
        raise DataError(f"{key}: class labels must be ≥ 0 (found {a.min()})")
    if classes is not None and n and a.max() >= classes:
        raise DataError(f"{key}: class labels must be < {classes}, the number of classes in the outputs (found "
                        f"{a.max()})")
    return a


def _side(arrays: dict, prefix: str, side: str) -> tuple[str, np.ndarray] | None:
    """The (key, array) of the first output kind present for ``prefix`` + kind + ``_side``."""
    found = [f"{prefix}{k}_{side}" for k in OUTPUT_KINDS if f"{prefix}{k}_{side}" in arrays]
    if len(found) > 1:
        raise DataError(f"{found[1]}: give one of {' / '.join(found)}, not several")
    return (found[0], arrays[found[0]]) if found else None


@overload
def _read_outputs(arrays: dict, prefix: str, side: str, required: Literal[True]) -> Outputs: ...


@overload
def _read_outputs(arrays: dict, prefix: str, side: str, required: bool) -> Outputs | None: ...


def _read_outputs(arrays: dict, prefix: str, side: str, required: bool) -> Outputs | None:
    got = _side(arrays, prefix, side)
    if got is None:
        if required:
            raise DataError(f"{prefix}logits_{side}: missing (give {prefix}logits_{side}, {prefix}probs_{side} "
                            f"or {prefix}loss_{side})")
        return None
    key, a = got
    kind = key[len(prefix):].split("_")[0]
    if kind == "loss":
        if prefix:
            raise DataError(f"{key}: the shadow model needs logits or probabilities, not losses")
        loss = _numeric(key, a)
        if loss.ndim != 1:
            raise DataError(f"{key}: expected shape (n,), one loss per sample; got {loss.shape}")
        if len(loss) == 0:
            raise DataError(f"{key}: has 0 rows (shape (0,)); it needs the loss of at least one sample")
        if np.any(loss < 0):
            raise DataError(f"{key}: losses must be ≥ 0 (cross-entropy)")
        logits = None
        n = len(loss)
    else:
        logits, loss = _outputs_array(key, a, kind, 1), None
        n = len(logits)
    lkey = f"{prefix}labels_{side}"
    labels = None
    if lkey in arrays:
        labels = _labels(lkey, arrays[lkey], n, None if logits is None else logits.shape[-1])
    elif logits is not None and not (prefix == "" and "labels" in arrays):
        raise DataError(f"{lkey}: missing (the class label of each sample, shape ({n},))")
    return Outputs(logits, loss, labels, key, tuple(a.shape))


def check(arrays: dict[str, np.ndarray], source: str = "arrays") -> ScanInput:
    """A :class:`ScanInput` from raw arrays by key, or one :class:`DataError` naming the key."""
    arrays = dict(arrays)
    ignored = sorted(k for k in arrays if k not in KNOWN_KEYS)
    for k in ignored:
        arrays.pop(k)
    refs_key = next((k for k in ("reference_logits", "reference_probs") if k in arrays), None)
    refs: References | None
    if "target_index" in arrays:
        members, nonmembers, refs = _from_target_index(arrays, refs_key)
    else:
        members = _read_outputs(arrays, "", "in", True)
        nonmembers = _read_outputs(arrays, "", "out", True)
        if (members.logits is None) != (nonmembers.logits is None):
            raise DataError("loss_in: members and non-members must be given as the same kind of output "
                            "(both logits, both probabilities or both losses)")
        if (members.logits is not None and nonmembers.logits is not None  # both or neither, checked above
                and members.logits.shape[1:] != nonmembers.logits.shape[1:]):
            raise DataError(f"{nonmembers.key}: shape {nonmembers.shape} does not fit the members' {members.key} "
                            f"{members.shape}: expected (n, {', '.join(map(str, members.shape[1:]))}), the same "
                            "outputs per sample")
        _shared_labels(arrays, members, nonmembers)
        refs = _references(arrays, refs_key, members, nonmembers) if refs_key else None
    for part, who in ((members, "members"), (nonmembers, "non-members")):
        if part.n < MIN_PER_SIDE:
            count = f"{part.n} {who[:-1] if part.n == 1 else who}"
            head = f"{part.key}: {count} (shape {part.shape})" if part.key else f"keep: the audited row marks {count}"
            raise DataError(f"{head}; a scan needs at least {MIN_PER_SIDE} members and {MIN_PER_SIDE} non-members")
    slices = _slices(arrays, members.n, nonmembers.n)
    shadow = None
    if any(k.startswith("shadow_") for k in arrays):
        s_in = _read_outputs(arrays, "shadow_", "in", True)
        s_out = _read_outputs(arrays, "shadow_", "out", True)
        if members.logits is None:
            raise DataError("shadow_logits_in: the shadow attack needs the audited model's logits or probabilities, "
                            "not only its losses")
        for key, s in (("shadow_logits_in", s_in), ("shadow_logits_out", s_out)):
            assert s.logits is not None  # a shadow model's losses are refused (_read_outputs)
            if s.logits.shape[-1] != members.logits.shape[-1]:
                raise DataError(f"{key}: {s.logits.shape[-1]} classes, the audited model's outputs have "
                                f"{members.logits.shape[-1]}")
        shadow = (s_in, s_out)
    if refs is None and any(k in arrays for k in ("keep", "population_logits", "population_probs",
                                                 "reference_population_logits", "reference_population_probs")):
        raise DataError("reference_logits: missing (keep and population arrays are used only with reference models)")
    return ScanInput(source, members, nonmembers, slices, shadow, refs, ignored)


def _shared_labels(arrays: dict, members: Outputs, nonmembers: Outputs) -> None:
    """``labels`` (N) in place of (or agreeing with) ``labels_in``/``labels_out``."""
    if "labels" not in arrays:
        return
    n = members.n + nonmembers.n
    classes = None if members.logits is None else members.logits.shape[-1]
    labels = _labels("labels", arrays["labels"], n, classes)
    for out, part in ((members, labels[:members.n]), (nonmembers, labels[members.n:])):
        if out.labels is None:
            out.labels = part
        elif not np.array_equal(out.labels, part):
            raise DataError("labels: differs from labels_in/labels_out (labels holds the members' labels, then the "
                            "non-members')")


def _references(arrays: dict, refs_key: str, members: Outputs, nonmembers: Outputs) -> References:
    if members.logits is None:
        raise DataError(f"{refs_key}: reference attacks need the audited model's logits or probabilities, "
                        "not only its losses")
    if members.labels is None:
        raise DataError("labels: missing (reference attacks need each sample's class label)")
    n = members.n + nonmembers.n
    ref = _outputs_array(refs_key, arrays[refs_key], refs_key.split("_")[1], 2)
    raw = tuple(arrays[refs_key].shape)
    if ref.shape[1] != n:
        raise DataError(f"{refs_key}: expected {n} samples in axis 1 (the members, then the non-members), "
                        f"got shape {raw}")
    if ref.shape[2:] != members.logits.shape[1:]:
        raise DataError(f"{refs_key}: shape {raw} does not fit the audited model's {members.key} {members.shape}: "
                        f"expected (M, {', '.join(map(str, (n, *members.shape[1:])))})")
    keep = _keep(arrays, ref.shape[:2])
    return References(ref, keep, *_population(arrays, ref))


def _keep(arrays: dict, shape: tuple[int, int]) -> np.ndarray:
    if "keep" not in arrays:
        raise DataError(f"keep: missing (shape {shape}, True where a reference model trained on the sample)")
    keep = arrays["keep"]
    if keep.shape != shape:
        raise DataError(f"keep: expected shape {shape}, got {keep.shape}")
    if keep.dtype != bool:
        k = _numeric("keep", keep)
        if not np.all((k == 0) | (k == 1)):
            raise DataError("keep: must be boolean (or 0/1)")
        keep = k.astype(bool)
    if shape[0] < 2:
        raise DataError(f"reference_logits: reference attacks need at least 2 reference models, got {shape[0]}")
    return keep


def _population(arrays: dict, ref: np.ndarray, target_row: int | None = None) -> tuple:
    """(reference population logits (M, Z, A, C), the audited model's (Z, A, C), labels (Z,)),
    or three Nones. With ``target_row`` the audited model's population outputs are that row of
    the reference population array (and ``population_logits`` is not given)."""
    pk = next((k for k in ("population_logits", "population_probs") if k in arrays), None)
    rk = next((k for k in ("reference_population_logits", "reference_population_probs") if k in arrays), None)
    if pk is None and rk is None and "population_labels" not in arrays:
        return None, None, None
    needed = [("reference_population_logits", rk), ("population_labels", "population_labels" in arrays)]
    if target_row is None:
        needed.insert(0, ("population_logits", pk))
    elif pk is not None:
        raise DataError(f"{pk}: with target_index the audited model's population outputs are a row of {rk}")
    for key, present in needed:
        if not present:
            raise DataError(f"{key}: missing (a population needs "
                            f"{'' if target_row is not None else 'population_logits, '}reference_population_logits "
                            "and population_labels)")
    assert rk is not None  # checked present above
    ref_pop = _outputs_array(rk, arrays[rk], rk.split("_")[2], 2, axes="MZ")
    ref_key = next(k for k in ("reference_logits", "reference_probs") if k in arrays)
    tail = tuple(arrays[ref_key].shape[2:])  # the references' outputs per sample, as the user gave them

    def dims(*lead) -> str:
        return f"({', '.join(map(str, (*lead, *tail)))})"

    if target_row is None:
        assert pk is not None  # checked present above
        target_pop = _outputs_array(pk, arrays[pk], pk.split("_")[1], 1, axes="Z")
        if target_pop.shape[1:] != ref.shape[2:]:
            raise DataError(f"{pk}: shape {tuple(arrays[pk].shape)} does not fit {ref_key} "
                            f"{tuple(arrays[ref_key].shape)}: expected {dims('Z')}, the same outputs per sample")
    else:
        target_pop = ref_pop[target_row]
    z = len(target_pop)
    if ref_pop.shape[:2] != (len(ref), z) or ref_pop.shape[2:] != ref.shape[2:]:
        raise DataError(f"{rk}: expected shape {dims(len(ref), z)} ({len(ref)} reference models, {z} population "
                        f"samples), got {tuple(arrays[rk].shape)}")
    labels = _labels("population_labels", arrays["population_labels"], z, ref.shape[-1])
    return ref_pop, target_pop, labels



def _from_target_index(arrays: dict, refs_key: str | None) -> tuple[Outputs, Outputs, References]:
    """The LiRA authors' layout: the audited model is one row of the reference arrays."""
    if refs_key is None:
        raise DataError("target_index: given without reference_logits (the arrays it indexes)")
    given = [k for k in arrays if k.split("_")[0] in OUTPUT_KINDS and k.endswith(("_in", "_out"))]
    if given:
        raise DataError(f"{given[0]}: with target_index the audited model's outputs are a row of {refs_key}; "
                        "give one or the other")
    t = arrays["target_index"]
    if t.ndim != 0 or t.dtype.kind not in "iu":
        raise DataError(f"target_index: expected one integer, got {t.dtype} of shape {t.shape}")
    ref = _outputs_array(refs_key, arrays[refs_key], refs_key.split("_")[1], 2)
    m, n = ref.shape[:2]
    t = int(t)
    if not 0 <= t < m:
        raise DataError(f"target_index: {t} is not a row of {refs_key} (M = {m})")
    keep = _keep(arrays, (m, n))
    if "labels" not in arrays:
        raise DataError(f"labels: missing (shape ({n},), each sample's class label)")
    labels = _labels("labels", arrays["labels"], n, ref.shape[-1])
    inside = keep[t]
    if inside.all() or not inside.any():
        raise DataError(f"keep: row {t} (the audited model's) must mark some samples as members and some as not")
    # Reorder the samples as members then non-members, the order of every other array here.
    order = np.concatenate([np.flatnonzero(inside), np.flatnonzero(~inside)])
    # The references: every other model, except one trained on exactly the complement of the
    # audited model's members (a partner, as privaudit's pools pair models): keeping it would
    # leak the audited model's membership through the reference set (one IN reference fewer
    # for each member).
    others = (np.arange(m) != t) & ~np.all(keep == ~inside, axis=1)
    if others.sum() < 2:
        raise DataError(f"reference_logits: after the audited row (and its complement) {others.sum()} reference "
                        "models remain; reference attacks need at least 2")
    members = Outputs(ref[t][inside], None, labels[inside], refs_key)
    nonmembers = Outputs(ref[t][~inside], None, labels[~inside], refs_key)
    ref_pop, target_pop, pop_labels = _population(arrays, ref, target_row=t)
    refs = References(ref[others][:, order], keep[others][:, order],
                      None if ref_pop is None else ref_pop[others], target_pop, pop_labels)
    if "slices" in arrays:
        s = arrays["slices"]
        if s.shape != (n,):
            raise DataError(f"slices: expected shape ({n},), got {s.shape}")
        arrays["slices_in"], arrays["slices_out"] = s[inside], s[~inside]
        del arrays["slices"]
    return members, nonmembers, refs


def _slices(arrays: dict, n_in: int, n_out: int) -> np.ndarray | None:
    if "slices" in arrays:
        s = arrays["slices"]
        if s.shape != (n_in + n_out,):
            raise DataError(f"slices: expected shape ({n_in + n_out},) (members, then non-members), got {s.shape}")
        return _slice_values("slices", s)
    have = [k for k in ("slices_in", "slices_out") if k in arrays]
    if not have:
        return None
    if len(have) == 1:
        missing = "slices_out" if have[0] == "slices_in" else "slices_in"
        raise DataError(f"{missing}: missing ({have[0]} is given; slices need both)")
    parts = []
    for key, n in (("slices_in", n_in), ("slices_out", n_out)):
        s = arrays[key]
        if s.shape != (n,):
            raise DataError(f"{key}: expected shape ({n},), got {s.shape}")
        parts.append(_slice_values(key, s))
    return np.concatenate(parts)


def _slice_values(key: str, s: np.ndarray) -> np.ndarray:
    if s.dtype.kind in "biu" or s.dtype.kind in "US":
        return s.astype(str)
    if s.dtype.kind == "f":
        if np.isnan(s).any():
            raise DataError(f"{key}: contains NaN")
        if np.all(s == np.round(s)):
            return s.astype(np.int64).astype(str)
        return s.astype(str)
    raise DataError(f"{key}: expected integers or strings, got dtype {s.dtype}")


def load(path: str | Path) -> ScanInput:
    """Read and check a scan input (``.npz``, folder of ``.npy`` or CSV)."""
    return check(read_arrays(path), source=Path(path).name)
