#!/usr/bin/env bash
# The main job: installs dependencies, builds ll3, and generates text with MODEL (a GGUF file or
# a Hugging Face directory), or with a default small model ll3 makes itself when none is given.
#   scripts/run.sh [MODEL] [extra ll3 run flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
model="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$model" ]; then
  model=models/default-llama3.2-1b-f16.gguf
  if [ ! -f "$model" ]; then
    mkdir -p models
    build/ll3 make-model --preset llama3.2-1b --type f16 --seed 1 --out "$model"
  fi
fi
exec build/ll3 run -m "$model" -p "${LL3_PROMPT:-The capital of France is}" -n "${LL3_N:-64}" "$@"
