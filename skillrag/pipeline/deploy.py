"""`skillrag deploy --pool cpu`: register the Prefect deployments of one work pool, creating the
pool first when the server lacks it. `prefect --no-prompt deploy --all` stops with exit 1 at the
first deployment whose pool does not exist (pipeline-gpu on a CPU-only machine), so the
deployments after it, the re-evaluations among them, are never created; deploying by name the
deployments of the pools that exist avoids that."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def deployments_on(prefect_yaml: Path, pool: str) -> list[str]:
    """The names of prefect.yaml's deployments that run on work pool `pool`, in file order."""
    deployments = yaml.safe_load(prefect_yaml.read_text(encoding="utf-8")).get("deployments") or []
    return [d["name"] for d in deployments if (d.get("work_pool") or {}).get("name") == pool]


def _prefect(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The prefect CLI of this interpreter's environment (a venv need not be activated)."""
    beside = Path(sys.executable).parent / "prefect"
    command = [str(beside) if beside.exists() else "prefect", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def deploy(project: Path, pool: str) -> list[str]:
    """Create process work pool `pool` unless the Prefect server (PREFECT_API_URL) has it, then
    deploy every deployment of prefect.yaml that runs on it; returns their names."""
    names = deployments_on(project / "prefect.yaml", pool)
    if not names:
        raise ValueError(f"no deployment in {project / 'prefect.yaml'} runs on work pool {pool!r}")
    if _prefect("work-pool", "inspect", pool, cwd=project).returncode != 0:
        created = _prefect("work-pool", "create", pool, "--type", "process", cwd=project)
        if created.returncode != 0:
            raise RuntimeError(f"`prefect work-pool create {pool}` failed: {(created.stderr or created.stdout).strip()[-1000:]}")
    done = _prefect("--no-prompt", "deploy", *(arg for name in names for arg in ("--name", name)), cwd=project)
    if done.returncode != 0:
        raise RuntimeError(f"`prefect deploy` failed: {(done.stderr or done.stdout).strip()[-2000:]}")
    return names
