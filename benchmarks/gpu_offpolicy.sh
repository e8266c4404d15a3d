#!/usr/bin/env bash
# Off-policy training on a GPU, one prepared run (docs/gpu.md, "Off-policy updates in
# blocks"): what K gradient steps after every K environment steps buy where each step waits
# on a host crossing, and how fast `sac_mujoco` trains with four runs sharing one GPU (the
# target: 1M steps in at most 15 minutes a run).
#
#   bash benchmarks/gpu_offpolicy.sh [OUTDIR]            # all three parts
#   PARTS=seeds bash benchmarks/gpu_offpolicy.sh         # one part (step, shared, seeds, m1m,
#                                                        # frontier)
#   QUICK=1 bash benchmarks/gpu_offpolicy.sh /tmp/check  # the same steps, tiny, on a CPU
#
# On the H200 (2026-11-30) `step` and `shared` took about 6 minutes together; `seeds` is
# new. It writes, under OUTDIR (default $OUT, else /tmp/gpu-offpolicy):
# - device.txt: the device, JAX and the CPU count;
# - step.txt: `benchmarks/sac_step.py --blocks 1 8 64`: one process, time per environment
#   step with K = 1, 8 and 64 (HalfCheetah-v5, the named config's values, no peers);
# - shared.txt: `benchmarks/update_ratio.py` with four runs at once (`--jobs 4`, each
#   pinned to a quarter of the cores, all on the one GPU, each taking 22.5% of its memory,
#   which `batchrl bench --jobs 4` sets): K = 1 and 8, two seeds each, 50k steps of
#   HalfCheetah-v5; the table's steps/s is each run's rate while sharing. Then K = 64, four
#   seeds at once.
# - seeds.txt: four runs in ONE process, `batchrl train --config sac_mujoco --seeds 4` (their
#   envs stepped as lanes of one host batch), K = 1 and then K = 8, 50k steps each: the
#   wall time and every run's evaluations (the runs side by side in one program, against
#   the four processes of shared.txt).
# - m1m.txt, m1m.md, m1m-records/: not in the default PARTS. The `mujoco-1m` suite's
#   `sac_mujoco` HalfCheetah-v5 entry, four seeds as lanes of one run (`batchrl bench
#   --lanes`), stopped after M1M_SECONDS (default 480, 90 with QUICK; SIGTERM: the run saves
#   a checkpoint) and reported: how far 1M steps get, the 100k/300k rows if it gets there.
#   Keep M1M_SECONDS ~100 s under the device call's limit (start-up, the checkpoint of four
#   1M-step memories and the report come after it). Its logdir is
#   benchmarks/results/mujoco-1m-lanes (git-ignored: a warm machine keeps it between calls,
#   so the same call continues the run); the records come back in m1m-records/.
# - frontier.txt: not in the default PARTS. `benchmarks/sac_step.py --algo A --skip-peers`
#   for TQC, CrossQ and SimbaV2 (issue 51): the time per learning step of each with its
#   named config's values (CrossQ's 1024-wide critics, SimbaV2's 512-wide blocks: on 2 quiet
#   CPU cores about 50 and 150 ms), which decides whether the mujoco-100k and simbav2-100k
#   suites fit a GPU session.
#
# A machine without MuJoCo, Gymnasium or tensorboardX (the lent GPU machine has JAX, flax and
# optax, but none of these three) takes them as wheels from .whl/ in the repository root,
# installed here into /tmp/site. Fetch them where the network is reachable (for Python 3.12,
# x86-64):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#     --platform manylinux2014_x86_64 --platform any -d .whl gymnasium==1.3.0 \
#     farama-notifications mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 glfw \
#     pyopengl websockets tensorboardX
# (about 26 MB; imageio-ffmpeg, 68 MB, is left out: training never loads it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-/tmp/gpu-offpolicy}}
mkdir -p "$out"
work=$(mktemp -d /tmp/gpu-offpolicy-runs.XXXX)  # the runs' checkpoints: ~1 GB, not kept
trap 'rm -rf "$work"' EXIT

if [ -d .whl ] && ! python3 -c 'import mujoco, gymnasium, tensorboardX' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export MUJOCO_GL=${MUJOCO_GL:-disable}

if [ -n "${QUICK:-}" ]; then
  step_args=(--steps 128 --learning-starts 100 --warmup 20)
  steps=3000; first=1000; every=1000; m1m_seconds=${M1M_SECONDS:-90}
else
  step_args=(--steps 2048)
  steps=50000; first=5000; every=10000; m1m_seconds=${M1M_SECONDS:-480}
fi

parts=${PARTS:-step shared seeds}
for part in $parts; do
  case $part in step|shared|seeds|m1m|frontier) ;; *) echo "PARTS: unknown part '$part'" \
    "(valid: step shared seeds m1m frontier)" >&2; exit 2;; esac
done
has() { [[ " $parts " == *" $1 "* ]]; }

python3 -c 'import jax, os, mujoco, gymnasium
d = jax.devices()[0]
print(jax.default_backend(), d.device_kind, "x", jax.device_count(), "jax", jax.__version__,
      "mujoco", mujoco.__version__, "gymnasium", gymnasium.__version__, os.cpu_count(), "CPUs")
' 2>&1 | tee "$out/device.txt" || exit 1

has step && python3 benchmarks/sac_step.py --blocks 1 8 64 --skip-peers "${step_args[@]}" \
  2>&1 | tee "$out/step.txt"

ratio() {  # K values, seeds: four runs at once on the one device
  python3 benchmarks/update_ratio.py --env HalfCheetah-v5 --ks $1 --seeds "$2" --jobs 4 \
    --steps "$steps" --first-update "$first" --eval-every "$every" --logdir "$work/ratio"
}
has shared && { ratio "1 8" 2; ratio 64 4; } 2>&1 | tee "$out/shared.txt"

together() {  # K: four runs in one process, their envs stepped as lanes of one host batch
  local start=$SECONDS
  python3 -m batchrl train --config sac_mujoco --seeds 4 --logdir "$work/seeds" \
    --timestamp "K$1" --no-progress --set steps="$steps" --set first_update="$first" \
    --set eval_every="$every" --set report_every="$every" --set checkpoint_every="$every" \
    --set update_frequency="$1" --set repeat_update="$1" 2>&1 | grep -v " INFO "
  local wall=$(( SECONDS - start > 0 ? SECONDS - start : 1 ))
  echo "K = $1, 4 seeds in one process, $steps steps each: $wall s from start to exit;"\
    "$(( 4 * steps / wall )) steps/s over the four (checkpoints as in shared.txt)"
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
  r = json.loads(line)
  if r["phase"] == "eval":
    print(r["step"], " ".join(f"{r.get(f'seed{i}/mean_score') or float('nan'):.0f}"
                               for i in range(4)))
' "$work/seeds/K$1-sac_mujoco/metrics.jsonl"
}
has seeds && { together 1; together 8; } 2>&1 | tee "$out/seeds.txt"

m1m() {  # four seeds of sac_mujoco HalfCheetah-v5 at 1M as one run, stopped after a while
  local logdir=benchmarks/results/mujoco-1m-lanes
  # --foreground: a Ctrl-C reaches the bench, and the signal comes once (the bench passes
  # one SIGINT on to its run, which stops after its update with a checkpoint)
  timeout --foreground -k 120 "$m1m_seconds" python3 -m batchrl bench --suite mujoco-1m --only \
    sac_mujoco:HalfCheetah-v5 --seeds 4 --lanes --logdir "$logdir" --report "$out/m1m.md"
  echo "bench exit code $? (124: stopped after M1M_SECONDS, with a checkpoint; the same call"\
    "continues it)"
  python3 benchmarks/keep_records.py "$logdir" --unfinished --into "$out/m1m-records"
  tail -n 3 "$logdir"/runs/*/metrics.jsonl
}
has m1m && m1m 2>&1 | tee "$out/m1m.txt"

has frontier && for algo in tqc crossq simbav2; do
  python3 benchmarks/sac_step.py --algo "$algo" --skip-peers "${step_args[@]}"
done 2>&1 | tee "$out/frontier.txt"
