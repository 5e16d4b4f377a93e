"""Worker process, per request: what each request asks for (the `Workload` protocol and its sources).

One module per source, as aiperf's ``dataset/loader/`` keeps one per dataset format; `build_workload` is the
only place that chooses among them. Imported by `tui.engine.stream` (never the reverse) and by nothing on the
face side.
"""

from __future__ import annotations

from tui.engine.config import WorkloadConfig
from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, Role, UserKey, Workload
from tui.engine.workload.synthetic import SyntheticWorkload

__all__ = [
    "Message",
    "RequestKey",
    "RequestSpec",
    "Role",
    "SyntheticWorkload",
    "UserKey",
    "Workload",
    "build_workload",
]


def build_workload(config: WorkloadConfig) -> Workload:
    """The workload ``config`` describes, built once per engine worker (it may hold per-worker state, such as
    each user's conversation, so it is made where it runs rather than sent across the process boundary)."""
    return SyntheticWorkload(config)
