"""Worker process, per request: what each request asks for (the `Workload` protocol and its sources).

One module per source, as aiperf's ``dataset/loader/`` keeps one per dataset format; `build_workload` is the
only place that chooses among them. Imported by `tui.engine.stream` (never the reverse) and by nothing on the
face side.
"""

from __future__ import annotations

from tui.engine.config import WorkloadConfig
from tui.engine.workload.conversation import Conversations
from tui.engine.workload.dataset import DatasetWorkload, check_dataset, load_dataset
from tui.engine.workload.entries import DatasetError, Entry
from tui.engine.workload.prefix import SharedPrefix
from tui.engine.workload.protocol import Message, RequestKey, RequestSpec, Role, UserKey, Workload
from tui.engine.workload.shaped import ShapedWorkload, is_shaped, shortest_isl
from tui.engine.workload.synthetic import SyntheticWorkload
from tui.engine.workload.trace import TraceWorkload

__all__ = [
    "Conversations",
    "DatasetError",
    "DatasetWorkload",
    "Entry",
    "Message",
    "RequestKey",
    "RequestSpec",
    "Role",
    "ShapedWorkload",
    "SharedPrefix",
    "SyntheticWorkload",
    "TraceWorkload",
    "UserKey",
    "Workload",
    "build_workload",
    "check_dataset",
    "load_dataset",
    "shortest_isl",
]


def build_workload(config: WorkloadConfig, *, workers: int = 1) -> Workload:
    """The workload ``config`` describes, built once per engine worker (it may hold per-worker state, such as
    each user's conversation, so it is made where it runs rather than sent across the process boundary).
    ``workers``: how many share the run (a dataset walks its entries across all of them).

    A trace's requests alone; else the source of the prompts (a dataset, shaped lengths, or today's
    synthetic prompts, byte for byte when nothing else is asked), then a shared prefix, then
    conversations, each only when configured."""
    if config.trace is not None:
        return TraceWorkload(config)  # the trace says every length; no prefix or turns of ours on top
    base = _source(config, workers)
    if config.turns > 1:
        # Later turns' questions calibrate apart (their cost comes with the history's templates): the first
        # turns' observations size the first of them (77 tokens, not 40, when sized blind), then only their
        # cost per word is kept.
        later = None if config.dataset is not None else _source(config, workers, borrowed=True)
        return Conversations(base, config, later)
    if config.shared_prefix > 0:
        return SharedPrefix(base, config)
    return base


def _source(config: WorkloadConfig, workers: int, *, borrowed: bool = False) -> Workload:
    if config.dataset is not None:
        return DatasetWorkload(config, workers=workers)
    if is_shaped(config):
        return ShapedWorkload(config, borrowed=borrowed)
    return SyntheticWorkload(config, borrowed=borrowed)
