#!/usr/bin/env bash
# Download, on a machine with PyPI access, the wheels a GPU node lacks for cotforge's training path
# (bench/gpu/run.sh installs them offline with --no-deps). The node has Python 3.12, torch, transformers,
# accelerate and safetensors; the training path also imports trl, datasets and datasets' own imports
# (multiprocess, dill, xxhash, pandas (+ pytz, tzdata, python-dateutil), pyarrow, requests (+ urllib3,
# charset-normalizer)), found by importing cotforge.train.sft in a venv holding only torch + transformers 5.17 +
# accelerate + safetensors; bench/gpu/train_throughput.py ran end to end there with exactly these versions. datasets 4.8.5
# (not 5.x) because it accepts huggingface-hub 0.25-1.x and pyarrow 21 (42 MB against pyarrow 26's 54 MB:
# the carried files must stay under 64 MiB); pandas 2.3 because it accepts numpy 1.26.
# Usage: bash bench/gpu/wheels.sh [DEST]   (default bench/wheels, git-ignored; ~57 MiB, carry it to the node)
set -euo pipefail
DEST=${1:-bench/wheels}
mkdir -p "$DEST"
python -m pip download --no-deps --only-binary=:all: --dest "$DEST" \
    --python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any \
    trl==1.16.0 datasets==4.8.5 multiprocess==0.70.19 dill==0.4.1 "xxhash>=3.5,<4" pandas==2.3.3 pytz==2026.6 tzdata==2026.6 \
    python-dateutil==4.0.0 pyarrow==21.0.0 requests==2.34.2 urllib3==2.8.0 charset-normalizer==3.5.3 click==8.5.1
du -sh "$DEST"
ls -1 "$DEST"
