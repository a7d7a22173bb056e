#!/usr/bin/env bash
# The one prepared command for an offline GPU node (Python 3.12 with torch, transformers, accelerate and
# safetensors preinstalled): install what cotforge's training path lacks from the carried wheels, install
# cotforge itself with --no-deps, then run bench/gpu/train_throughput.py for a fixed budget with the attention
# implementations the node has. Writes gpu_train.json (after every case, so a kill keeps what was measured),
# gpu_train.md (the table) and env.txt into OUT_DIR.
#   here:      bash bench/gpu/wheels.sh                      # fills bench/wheels (git-ignored, ~57 MiB)
#   the node:  bash bench/gpu/run.sh "$OUT" 330              # carry: ["bench/wheels"]
#   (GPU_TRAIN_ARGS="--shapes tiny ..." appends arguments to bench/gpu/train_throughput.py, e.g. for a CPU dry run)
# Budget: BUDGET_S (default 330) is when the bench stops starting new cases; a case already running may
# take ~60 s more, and the command is killed at BUDGET_S + 90 s, so the whole call stays under 8 minutes.
set -uo pipefail
OUT_DIR=${1:-${OUT:-gpu_out}}
BUDGET_S=${2:-330}
WHEELS=${WHEELS:-bench/wheels}
mkdir -p "$OUT_DIR"
start=$(date +%s)
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  python -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
} | tee "$OUT_DIR/env.txt"

# 1. wheels the node lacks: import name -> distribution (only the missing ones are installed, --no-deps)
missing=()
for pair in trl:trl datasets:datasets multiprocess:multiprocess dill:dill xxhash:xxhash pandas:pandas \
            pytz:pytz dateutil:python-dateutil pyarrow:pyarrow requests:requests urllib3:urllib3 \
            charset_normalizer:charset-normalizer click:click yaml:pyyaml; do
  python -c "import ${pair%%:*}" 2>/dev/null || missing+=("${pair#*:}")
done
python -c "import tzdata" 2>/dev/null || missing+=(tzdata)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing from $WHEELS: ${missing[*]}" | tee -a "$OUT_DIR/env.txt"
  python -m pip install --quiet --no-deps --no-index --find-links "$WHEELS" "${missing[@]}" 2>&1 | tail -3
fi

# 2. cotforge itself, --no-deps over the node's packages; without setuptools, a path shim with the same layout
if ! python -m pip install --quiet --no-deps --no-build-isolation --no-index -e . 2>"$OUT_DIR/pip_cotforge.txt"; then
  shim=$(mktemp -d)/site && mkdir -p "$shim/cotforge"
  for sub in curate train pipelines; do ln -s "$PWD/$sub" "$shim/cotforge/$sub"; done
  export PYTHONPATH="$shim${PYTHONPATH:+:$PYTHONPATH}"
  echo "cotforge via PYTHONPATH shim ($(tail -1 "$OUT_DIR/pip_cotforge.txt"))" | tee -a "$OUT_DIR/env.txt"
fi
python -c "import cotforge.train.sft, trl, datasets; print('cotforge ok; trl', trl.__version__, 'datasets', datasets.__version__)" \
  2>&1 | tee -a "$OUT_DIR/env.txt"

# 3. the attention implementations this node has
attn=sdpa
python -c "from torch.nn.attention.flex_attention import flex_attention" 2>/dev/null && attn="$attn,flex_attention"
python -c "import flash_attn" 2>/dev/null && attn="$attn,flash_attention_2"
echo "attention: $attn; setup took $(( $(date +%s) - start )) s" | tee -a "$OUT_DIR/env.txt"

# 4. the bench, for the budget left
left=$(( BUDGET_S - ($(date +%s) - start) ))
timeout --signal=TERM --kill-after=10 $(( left + 90 )) \
  python -m bench.gpu.train_throughput --budget-s "$left" --attn "$attn" --out-dir "$OUT_DIR" ${GPU_TRAIN_ARGS:-} 2>&1 | tee "$OUT_DIR/log.txt" | tail -40
echo "exit ${PIPESTATUS[0]}; total $(( $(date +%s) - start )) s" | tee -a "$OUT_DIR/env.txt"
