"""The fixed set of runs whose outputs pin privaudit's behaviour across refactors.

``python tests/regression/runs.py OUT [NAME ...]`` runs each command of :data:`RUNS` (or the
named ones) with ``python -m privaudit`` in its own workspace under ``OUT`` and copies every CSV
it wrote to ``OUT/csv/NAME/``. ``tests/test_regression.py`` compares those CSVs with the copies
recorded in ``tests/fixtures/regression/`` (docs/architecture.md says when): identical text, or
numbers within :data:`RTOL` where only a summation order may differ. ``OUT/csv/versions.json``
records the numerical libraries' versions, copied beside the fixtures when they are recorded.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

#: Relative tolerance of a number in a compared CSV (float32 sums in a different order).
RTOL = 1e-6

#: name -> arguments after ``privaudit``; ``{ws}`` is the run's workspace, ``{out}`` the root.
RUNS: dict[str, list[str]] = {
    "audit": ["audit", "--dataset", "digits", "--workdir", "{ws}"],
    "defenses-all": ["audit", "--dataset", "digits", "--defenses", "all", "--epochs", "10",
                     "--workdir", "{ws}"],
    "canaries": ["audit", "--dataset", "digits", "--canaries", "mislabeled:20", "--workdir", "{ws}"],
    "target-accuracies": ["audit", "--dataset", "digits", "--target-accuracies", "0.85",
                          "--workdir", "{ws}"],
    "reproduce-mg-noise": ["reproduce", "mg-noise", "--dataset", "digits", "--scale", "reduced",
                           "--workdir", "{ws}"],
    # a scan of the first audit's undefended target, exported to the format scan reads
    "scan": ["scan", "{out}/scan-input.npz", "--out", "{ws}/scan"],
}

#: Runs cheap enough for the test suite (a minute or two each on 2 cores).
QUICK = ("audit", "scan")

#: The numerical libraries whose releases may move the last float digits of a training run
#: (a kernel's summation order); their versions are recorded with the fixtures.
NUMERIC_STACK = ("torch", "numpy", "scipy", "scikit-learn", "pandas", "opacus")
VERSIONS = "versions.json"


def numeric_versions() -> dict[str, str]:
    """The installed version of each library of :data:`NUMERIC_STACK`."""
    from importlib.metadata import version

    return {name: version(name) for name in NUMERIC_STACK}


def privaudit(args: list[str], cwd: Path) -> None:
    """Run ``python -m privaudit ARGS``; raise with its output when it fails."""
    done = subprocess.run([sys.executable, "-m", "privaudit", *args], cwd=cwd,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"privaudit {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def export_scan_input(out: Path) -> None:
    """Write the first audit's undefended target's outputs to ``out/scan-input.npz``."""
    ws = out / "audit"
    runs = sorted(p.name for p in (ws / "models").iterdir() if p.name.startswith("target-") and "-plain-" in p.name)
    if not runs:
        raise RuntimeError("the audit run wrote no undefended target to export")
    privaudit(["export-logits", runs[0], "--workdir", str(ws), "--out",
               str(out / "scan-input.npz")], cwd=out)


def record(out: Path, names: list[str]) -> None:
    """Run the named runs into ``out`` and gather their CSVs under ``out/csv``."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        ws = out / name
        if name == "scan":
            if not (out / "audit").exists():
                record(out, ["audit"])
            export_scan_input(out)
        if not ws.exists():
            ws.mkdir()
            args = [a.format(ws=ws, out=out) for a in RUNS[name]]
            privaudit(args, cwd=out)
        dest = out / "csv" / name
        shutil.rmtree(dest, ignore_errors=True)
        for csv in sorted(ws.rglob("*.csv")):
            target = dest / csv.relative_to(ws)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(csv, target)


if __name__ == "__main__":
    import json

    root = Path(sys.argv[1]).resolve()
    record(root, sys.argv[2:] or list(RUNS))
    (root / "csv" / VERSIONS).write_text(json.dumps(numeric_versions(), indent=1) + "\n")
