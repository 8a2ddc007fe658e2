"""What the flows start listens on this machine only, and Prefect's temporary server gets the
project's patient start-up time whichever flow module is imported first."""

from __future__ import annotations

import os
import subprocess
import sys

from flows.common import task_runner
from tests.conftest import REPO

PROBE = """
import flows.stages
from prefect.settings import get_current_settings
print(get_current_settings().server.ephemeral.startup_timeout_seconds)
"""


def test_the_local_dask_cluster_and_its_dashboard_bind_127_0_0_1():
    kwargs = task_runner(2).cluster_kwargs
    assert kwargs["host"] == "127.0.0.1"
    assert kwargs["dashboard_address"].startswith("127.0.0.1:")


def test_prefects_startup_timeout_is_set_before_prefect_reads_its_settings():
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split()[-1] == "180"
