"""``privaudit.scan()``: audit a model from its outputs alone, given as arrays (NumPy, torch,
lists) or as a file (.npz, a folder of .npy files, CSV); ``privaudit scan`` prints what it
returns."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from privaudit.api import params
from privaudit.api.results import ShortRepr
from privaudit.core.defaults import MAX_SEED
from privaudit.core.timing import importing, phase
from privaudit.errors import ConfigError
from privaudit.files.atomic import check_output_folder
from privaudit.scanning import FILES, require_input

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.scanning.run import ScanResult

_Report = TypeVar("_Report", bound="ScanReport")


@dataclass(repr=False)
class ScanReport(ShortRepr):
    """What a scan found: a row per attack with its intervals (:attr:`table`), per class and
    slice (:attr:`groups`), the headline and the files written under :attr:`folder`."""

    table: pd.DataFrame          #: one row per attack: AUC, TPR at low FPR, precision, recall, ε lower bound
    groups: pd.DataFrame         #: the strongest attack per class and per slice
    headline: dict[str, Any]       #: ``verdict``, ``leaks``, ``familywise`` (the test behind them) and ``strongest``
    folder: Path
    report_path: Path              #: the self-contained index.html
    summary: dict[str, Any] = field(repr=False, default_factory=dict)  #: what ``privaudit scan --json`` prints
    result: Any = field(repr=False, default=None)            #: privaudit.scanning.run.ScanResult
    _command = "scan"                                         # the command whose result this is

    @property
    def verdict(self) -> str:
        verdict: str = self.headline.get("verdict", "")
        return verdict

    @property
    def strongest(self) -> str | None:
        return self.headline.get("strongest")

    def scores(self) -> pd.DataFrame:
        """Per-sample scores of every attack: ``member`` (1 for a member; members first) and a
        column per attack (higher: more likely a member)."""
        import pandas as pd

        return pd.DataFrame({"member": self.result.membership.astype(int), **self.result.scores})

    def to_dict(self) -> dict[str, Any]:
        """The document ``privaudit scan --json`` prints (what summary.json holds)."""
        return dict(self.summary)

    @classmethod
    def of(cls: type[_Report], result: ScanResult, summary: dict[str, Any], folder: Path, **extra: Any) -> _Report:
        """From a :class:`~privaudit.scanning.run.ScanResult` and the summary
        :func:`privaudit.scanning.report.write` returned."""
        return cls(table=result.table(), groups=result.groups, headline=summary["headline"], folder=folder,
                   report_path=Path(summary["html"]), summary=summary, result=result, **extra)

    def _repr_html_(self) -> str:
        keep = [c for c in ("attack", "auc", "auc_lo", "auc_hi", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr",
                            "eps_lower_bound") if c in self.table.columns]
        table = self.table[keep].to_html(index=False, border=0, float_format=lambda v: f"{v:.3f}")
        return (f"<div><h3>privaudit {self._command}</h3>{self._notes_html()}<p>{html.escape(self.verdict)}</p>{table}"
                f"<p>Report: <a href=\"{html.escape(self.report_path.resolve().as_uri())}\">"
                f"{html.escape(str(self.report_path))}</a></p></div>")

    def _notes_html(self) -> str:
        """What a notebook shows between the title and the verdict (nothing, for a scan)."""
        return ""


def _stem(path: str | Path) -> str:
    p = Path(path)
    name = p.name if p.is_dir() else p.stem
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "input"


@params.options_named
def scan(input: str | Path | None = None, *, out: str | Path | None = None, delta: float = 1e-5, folds: int = 5,
         seed: int = 0, command: str = "", **arrays: Any) -> ScanReport:
    """Run every attack the outputs allow (loss, confidence, entropy, modified entropy, a
    cross-validated attack classifier; the shadow attack with a shadow model's outputs; LiRA,
    RMIA and the many-shadow attack with reference models'), with intervals, per class and
    per slice, and write attacks.csv, groups.csv, scores.npz, summary.json and index.html
    into ``out`` (default ``reports/scan/<input name>``, or ``reports/scan/arrays``).

    Give ``input`` (a path) or the arrays by their names in the file format (docs/scan.md):
    ``logits_in``, ``labels_in``, ``logits_out``, ``labels_out`` (or ``probs_*`` / ``loss_*``),
    optionally ``shadow_*``, ``reference_logits`` with ``keep``, ``slices_*``. Nothing is
    unpickled. ``command``: the command line recorded on the page."""
    if (input is None) == (not arrays):
        raise ConfigError("give scan an input path or its arrays (logits_in=..., labels_in=..., logits_out=..., "
                          "labels_out=...), not both")
    if not 2 <= folds <= 100:
        raise ConfigError(f"--folds must be between 2 and 100 (got {folds})")
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"--seed must be between 0 and {MAX_SEED} (got {seed})")
    if not 0 < delta <= 1:
        raise ConfigError(f"--delta must be > 0 and <= 1 (got {params.num(delta)})")
    if input is not None:
        require_input(input)
    folder = Path(out) if out else Path("reports") / "scan" / (_stem(input) if input is not None else "arrays")
    check_output_folder(folder, "--out" if out else "the default --out", FILES)  # before any work
    with importing():  # the input is read and checked with NumPy alone, before torch, pandas and scikit-learn
        import numpy as np

        from privaudit.scanning.inputs import KNOWN_KEYS, check, load

    with phase("data"):
        if input is not None:
            inp = load(input)
        else:
            unknown = sorted(k for k in arrays if k not in KNOWN_KEYS)
            if unknown:
                raise ConfigError(f"scan got an unknown array {unknown[0]!r}; expected names such as logits_in, "
                                  "labels_in, logits_out, labels_out (docs/scan.md)")
            inp = check({k: np.asarray(v.detach().cpu() if hasattr(v, "detach") else v) for k, v in arrays.items()})
    with importing():
        from privaudit.scanning.report import write
        from privaudit.scanning.run import scan as run_scan
    with phase("attack"):
        result = run_scan(inp, delta=delta, folds=folds, seed=seed)
    with phase("report"):
        summary = write(result, folder, command=command)
    return ScanReport.of(result, summary, folder)
