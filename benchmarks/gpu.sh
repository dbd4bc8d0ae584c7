#!/usr/bin/env bash
# The benchmark suite and a paper-scale audit on a CUDA GPU, with their tables.
#
#   bash benchmarks/gpu.sh [DATA_DIR]
#
# DATA_DIR holds cifar-10-batches-py (default: $PRIVAUDIT_DATA_DIR, else ../shared/data).
# Writes benchmarks/results-gpu/{results.json,results.md,audit-*.json,summary.md}.
# Set QUICK=1 for a smoke run (tiny sizes, no paper-scale audit). Set PAPER=0 to skip the
# paper-scale audit (it trains ~70 models per architecture; see the README for its figures).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-${PRIVAUDIT_DATA_DIR:-../shared/data}}"
OUT="benchmarks/results-gpu"
mkdir -p "$OUT"
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"

if [ "${QUICK:-0}" = "1" ]; then
  python -m benchmarks --device cuda --quick --data-dir "$DATA" --out "$OUT"
  exit 0
fi
python -m benchmarks --device cuda --data-dir "$DATA" --out "$OUT"

if [ "${PAPER:-1}" = "1" ]; then
  # Paper scale (docs/methods.md A.3): 10,520-image parts, 50 epochs, the default kappa grid and
  # DP-SGD grid, every attack, MLP and CNN, one fresh workspace each.
  for model in mlp cnn; do
    work="$(mktemp -d)"
    start=$(date +%s)
    python -m privaudit audit --model "$model" --dataset cifar10 --data-dir "$DATA" --epochs 50 \
      --device cuda --workdir "$work" --json > "$OUT/audit-$model.json"
    echo "$model $(( $(date +%s) - start ))" >> "$OUT/audit-wall.txt"
    rm -rf "$work"
  done
  python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
lines = ["| paper-scale audit | wall s | data | train | attack | report |", "|---|---|---|---|---|---|"]
for model in ("mlp", "cnn"):
    doc = json.loads((out / f"audit-{model}.json").read_text())
    p = doc["phase_seconds"]
    lines.append(f"| {model} | {doc['wall_seconds']:.0f} | {p['data']:.0f} | {p['train']:.0f} | "
                 f"{p['attack']:.0f} | {p['report']:.0f} |")
text = "\n".join(lines) + "\n"
(out / "summary.md").write_text(text)
print(text)
PY
fi
cat "$OUT/results.md"
