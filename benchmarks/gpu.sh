#!/usr/bin/env bash
# The benchmark suite and the paper-scale runs on one CUDA GPU, with per-phase seconds.
#
#   bash benchmarks/gpu.sh [DATA_DIR]
#
# DATA_DIR holds cifar-10-batches-py (default: $PRIVAUDIT_DATA_DIR, else ../shared/data).
# Writes benchmarks/results-gpu/{results.json,results.md,*.json,summary.md}. Runs, in order:
#   1. the README's digits audit;
#   2. a CIFAR-10 MLP audit at paper scale (parts of 10,520, 50 epochs, the default grids);
#   3. `reproduce mg-noise --scale full --models cnn` for at most REPRODUCE_S seconds (default
#      240), resumable; its share of the protocol's models finished and the projected total;
#   4. the benchmark suite (SUITE=0 skips it).
# DEVICE=cpu runs the same commands on the CPU (with QUICK=1: tiny sizes, for the tests).
# QUICK=1: digits-sized runs and a quick suite, to check that the script works.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-${PRIVAUDIT_DATA_DIR:-../shared/data}}"
DEVICE="${DEVICE:-cuda}"
OUT="${OUT:-benchmarks/results-gpu}"
REPRODUCE_S="${REPRODUCE_S:-240}"
mkdir -p "$OUT"
: > "$OUT/wall.txt"
if [ "$DEVICE" = "cuda" ]; then
  python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU visible')"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
fi
if [ "${QUICK:-0}" = "1" ]; then
  MLP=(--part-size "${MLP_PART:-300}" --epochs 1 --kappas 0.5 --sigmas 1 --attacks shadow)
  DIGITS=(--epochs 2 --attacks shadow)
  REPRO=(--dataset digits --scale reduced --experiments accuracy --models mlp --seeds 0)
else
  MLP=(--part-size 10520 --epochs 50)
  DIGITS=()
  REPRO=(--data-dir "$DATA" --scale full --models cnn --seeds 0,1,2)
fi

timed() {  # name, then the privaudit command: its --json to $OUT/name.json, its wall to wall.txt
  local name="$1"; shift
  local work; work="$(mktemp -d)"
  local start; start=$(date +%s.%N)
  local rc=0
  "$@" --device "$DEVICE" --workdir "$work" --json > "$OUT/$name.json" || rc=$?
  echo "$name $(python -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)") $rc" >> "$OUT/wall.txt"
  echo "$work"
}

rm -rf "$(timed digits-audit python -m privaudit audit --dataset digits "${DIGITS[@]}")"
rm -rf "$(timed mlp-audit python -m privaudit audit --model mlp --dataset cifar10 --data-dir "$DATA" "${MLP[@]}")"
# the reproduction for a bounded time (timeout ends it; a rerun in the same workspace resumes)
work="$(timed reproduce timeout "$REPRODUCE_S" python -m privaudit reproduce mg-noise "${REPRO[@]}")"
python - "$OUT" "$work" "$REPRODUCE_S" "${QUICK:-0}" <<'PY'
import json, sys
from pathlib import Path
from privaudit.reproduction.protocol import protocol
out, work, limit, quick = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
proto = (protocol("reduced", "digits", seeds=[0], experiments=["accuracy"], families=["mlp"]) if quick
         else protocol("full", seeds=[0, 1, 2], families=["cnn"]))
needed = proto.model_count()
done = sum(1 for p in (work / "models").glob("[!.]*/weights.npz"))
walls = {line.split()[0]: (float(line.split()[1]), int(line.split()[2])) for line in (out / "wall.txt").read_text().splitlines()}
wall, rc = walls["reproduce"]
lines = ["| run | wall s | data | train | evaluate | attack | report |", "|---|---|---|---|---|---|---|"]
for name in ("digits-audit", "mlp-audit"):
    doc = json.loads((out / f"{name}.json").read_text())
    p = doc["phase_seconds"]
    lines.append(f"| {name} | {doc['wall_seconds']:.1f} | " + " | ".join(f"{p.get(k, 0):.1f}" for k in
                 ("data", "train", "evaluate", "attack", "report")) + " |")
state = "finished" if rc == 0 else f"stopped at {limit:.0f} s"
projected = f"; projected total {wall * needed / done / 60:.0f} min" if done and rc != 0 else ""
lines += ["", f"reproduce ({proto.scale}, {', '.join(proto.families)}): {state}, {done} of {needed} models in "
          f"{wall:.0f} s{projected}"]
text = "\n".join(lines) + "\n"
(out / "summary.md").write_text(text)
print(text)
PY
rm -rf "$work"
if [ "${SUITE:-1}" = "1" ]; then
  if [ "${QUICK:-0}" = "1" ]; then
    python -m benchmarks --device "$DEVICE" --quick --only training,dpsgd --data-dir "$DATA" --out "$OUT"
  else
    python -m benchmarks --device "$DEVICE" --data-dir "$DATA" --out "$OUT"
  fi
fi
