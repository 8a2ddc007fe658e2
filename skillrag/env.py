"""Process-wide settings that must be in place before heavy libraries are imported.

Offline and quiet by default (DESIGN §5): the hubs are unreachable here, and `datasets`,
DVC and Prefect otherwise try the network. Patient with Prefect's temporary server (a flow run
without PREFECT_API_URL starts one): its 20 s default runs out on a busy two-core machine.
Users can override any of these.
"""

from __future__ import annotations

import os

OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DVC_NO_ANALYTICS": "1",
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "GX_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
}


def apply_offline_defaults() -> None:
    """Set each variable unless the user already chose a value."""
    for key, value in OFFLINE_DEFAULTS.items():
        os.environ.setdefault(key, value)
