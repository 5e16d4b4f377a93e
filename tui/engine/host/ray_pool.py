"""`RayWorkerPool`: the handle's workers on a Ray cluster, behind the pool surface (`tui.engine.host.pool`).

One `NodeAgent` actor per node, placed by node affinity, starts the unchanged worker processes there. Per
agent one pump thread keeps one `collect` call outstanding and writes what comes back into a local pipe per
worker, so the handle's `Reader` waits on the same kind of pipes as for local workers. The collects are the
heartbeat: a node whose collect has not returned for ``silent_after_s`` is reported silent, after
``lost_after_s`` (or at Ray's own error) lost, and its workers' pipes get a `WorkerLost`. Commands carry a
sequence number per worker (the agent is threaded: calls may run out of order). The only face module that
imports Ray.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import platform
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import tui
from tui.engine.config import RayPlacement
from tui.engine.host.pool import NodeInfo, PoolError
from tui.engine.remote.agent import CLOSED, NodeAgent
from tui.engine.remote.clock import SAME_HOST, ClockEstimate, node_clock
from tui.engine.wire import Command, WorkerLost, WorkerSpec

if TYPE_CHECKING:
    from tui.engine.results.model import Results

COLLECT_WAIT_S = 0.2
"""How long an agent's collect waits for a first message: the longest a quiet node's heartbeat is apart."""
AGENT_CONCURRENCY = 8
"""Calls an agent serves at once (a waiting collect, commands, clock readings)."""
START_TIMEOUT_S = 60.0


def connect(address: str) -> None:
    """Join the cluster at ``address`` (on the face's main thread, before any app starts: Ray installs
    signal handlers). Ray's own log lines stay out of the face's terminal."""
    if ray.is_initialized():
        return
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as exc:
        raise PoolError(f"cannot join the Ray cluster at {address}: {_one_line(exc)}") from exc


def face_versions() -> dict[str, str]:
    return {"tokentop": tui.__version__, "python": platform.python_version(), "ray": ray.__version__}


def version_mismatch(host: str, info: dict[str, Any]) -> str | None:
    """One line naming the node when its tokentop, Python (major.minor) or Ray differs from the face's."""
    face = face_versions()
    node = {k: str(info.get(k, "")) for k in face}
    same = (
        node["tokentop"] == face["tokentop"]
        and node["python"].split(".")[:2] == face["python"].split(".")[:2]
        and node["ray"] == face["ray"]
    )
    if same:
        return None
    return (
        f"node {host} runs tokentop {node['tokentop']}, Python {node['python']}, Ray {node['ray']}; this "
        f"machine runs tokentop {face['tokentop']}, Python {face['python']}, Ray {face['ray']}"
    )


@dataclass
class _Node:
    node_id: str
    host: str
    cpus: int
    agent: Any = None
    workers: list[int] = field(default_factory=list)
    clock: ClockEstimate = SAME_HOST
    lost_at_ns: int | None = None


def alive_nodes() -> list[_Node]:
    """The cluster's live nodes with their CPUs."""
    out = []
    cluster: Any = ray  # its `nodes` is untyped; whether ray is installed where mypy runs or not
    for n in cluster.nodes():
        if n.get("Alive"):
            cpus = int(n.get("Resources", {}).get("CPU", 0))
            out.append(_Node(n["NodeID"], n.get("NodeManagerAddress", "?"), cpus))
    return out


def spread(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` workers over nodes in proportion to ``weights`` (largest remainder, earlier nodes first)."""
    if not weights:
        return []
    w = [max(1, x) for x in weights]
    exact = [total * x / sum(w) for x in w]
    out = [int(x) for x in exact]
    order = sorted(range(len(w)), key=lambda i: (out[i] - exact[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def start_agent(node: _Node, placement: RayPlacement) -> Any:
    """The node's agent actor (no secret in its constructor: Ray keeps an actor's creation arguments)."""
    remote = ray.remote(NodeAgent).options(
        num_cpus=0,
        max_concurrency=AGENT_CONCURRENCY,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
    )
    return remote.remote(placement.dead_after_s, placement.test_clock_offset_ns)


def agent_clock(agent: Any, info: dict[str, Any]) -> ClockEstimate:
    """The agent's node clock against this machine's (`tui.engine.remote.clock.node_clock`)."""
    return node_clock(
        str(info.get("boot_id", "")), lambda: int(ray.get(agent.clock.remote())), time.perf_counter_ns
    )


class RayWorkerPool:
    """Places the workers when constructed (joins the cluster, starts the agents, checks their versions,
    estimates their clocks); `spawn` starts the workers. Raises `PoolError` in one line."""

    def __init__(
        self, placement: RayPlacement, workers: int, *, on_notice: Callable[[str], None] | None = None
    ) -> None:
        self.placement = placement
        self._on_notice = on_notice or (lambda _line: None)
        connect(placement.address)
        nodes = alive_nodes()
        face_node = ray.get_runtime_context().get_node_id()
        if not placement.head_workers and len(nodes) > 1:
            nodes = [n for n in nodes if n.node_id != face_node]
        if not nodes:
            raise PoolError(f"the Ray cluster at {placement.address} has no live node")
        if placement.per_node is not None:
            counts = [placement.per_node] * len(nodes)
        else:
            counts = spread(workers, [n.cpus - 1 for n in nodes])
        self.workers = sum(counts)
        index = 0
        self._nodes = []
        for node, count in zip(nodes, counts, strict=True):
            if count:
                node.workers = list(range(index, index + count))
                index += count
                self._nodes.append(node)
        for node in self._nodes:
            node.agent = start_agent(node, placement)
        try:
            infos = ray.get([n.agent.info.remote() for n in self._nodes], timeout=START_TIMEOUT_S)
        except Exception as exc:
            self._kill_agents()
            raise PoolError(f"the node agents did not start: {_one_line(exc)}") from exc
        for node, info in zip(self._nodes, infos, strict=True):
            node.host = str(info.get("host") or node.host)
            if (line := version_mismatch(node.host, info)) is not None:
                self._kill_agents()
                raise PoolError(line)
            node.clock = agent_clock(node.agent, info)
        names = [n.host for n in self._nodes]
        for node in self._nodes:  # several nodes on one machine: told apart by their node id
            if names.count(node.host) > 1:
                node.host = f"{node.host}/{node.node_id[:6]}"
        self._node_of = {i: n for n in self._nodes for i in n.workers}
        self._seq = [0] * self.workers
        self._writers: dict[int, Connection] = {}
        self.data: list[Connection] = []
        self._pumps: list[threading.Thread] = []
        self._closing = threading.Event()

    # --- the pool surface ---------------------------------------------------------------------

    def spawn(self, specs: Iterable[WorkerSpec]) -> None:
        """Check every node reaches the target, ship the files the specs name, start the workers."""
        by_node: dict[str, list[WorkerSpec]] = {}
        all_specs = list(specs)
        for spec in all_specs:
            by_node.setdefault(self._node_of[spec.index].node_id, []).append(spec)
            r, w = multiprocessing.Pipe(duplex=False)
            self.data.append(r)
            self._writers[spec.index] = w
        if not all_specs:
            return
        url = all_specs[0].target.base_url
        reach = ray.get([n.agent.reaches.remote(url) for n in self._nodes], timeout=START_TIMEOUT_S)
        for node, why in zip(self._nodes, reach, strict=True):
            if why:
                raise PoolError(f"node {node.host} cannot reach {url}: {why}")
        files = _files_of(all_specs[0])
        calls = [
            n.agent.spawn.remote(
                by_node.get(n.node_id, []), {} if n.clock.same_host else files, n.clock.offset_ns
            )
            for n in self._nodes
        ]
        ray.get(calls, timeout=START_TIMEOUT_S)
        for node in self._nodes:
            pump = threading.Thread(
                target=self._pump, args=(node,), name=f"tokentop-pump-{node.host}", daemon=True
            )
            pump.start()
            self._pumps.append(pump)

    def send_each(self, commands: Iterable[Command]) -> None:
        """Worker i gets the i-th command (without waiting for the call); a lost worker is skipped."""
        for i, command in enumerate(commands):
            node = self._node_of.get(i)
            if node is None or node.lost_at_ns is not None or i >= len(self._seq):
                continue
            seq = self._seq[i]
            self._seq[i] += 1
            with contextlib.suppress(Exception):
                node.agent.send.remote(i, seq, command)

    def send_all(self, command: Command) -> None:
        self.send_each(command for _ in range(self.workers))

    def exitcode(self, i: int) -> int | None:
        """Unknown from here (the process is on another machine)."""
        return None

    def join(self) -> None:
        """Wait for the pumps to relay the workers' last words, then stop and remove the agents."""
        deadline = time.monotonic() + 5.0
        for pump in self._pumps:
            pump.join(max(0.1, deadline - time.monotonic()))
        self._closing.set()
        live = [n for n in self._nodes if n.lost_at_ns is None]
        with contextlib.suppress(Exception):
            ray.get([n.agent.stop_workers.remote(2.0) for n in live], timeout=10.0)
        self._kill_agents()

    def close(self) -> None:
        self._closing.set()
        for conn in [*self._writers.values(), *self.data]:
            with contextlib.suppress(OSError):
                conn.close()

    def nodes(self, t0_ns: int) -> list[NodeInfo]:
        """Where the load comes from, for the results and the status (``lost_at_s`` from ``t0_ns``)."""
        return [
            NodeInfo(
                node_id=n.node_id,
                host=n.host,
                workers=tuple(n.workers),
                cpus=n.cpus,
                same_clock=n.clock.same_host,
                clock_offset_ms=n.clock.offset_ms,
                clock_rtt_ms=n.clock.rtt_ns / 1e6,
                clock_bound_ms=n.clock.bound_ms,
                lost_at_s=None if n.lost_at_ns is None else (n.lost_at_ns - t0_ns) / 1e9,
            )
            for n in self._nodes
        ]

    def in_results(self, results: Results, t0_ns: int) -> Results:
        """``results`` saying where the load came from: the placement in its config, the nodes in its client
        (with when a lost one went)."""
        p = self.placement
        placement = {"ray": p.address, "per_node": p.per_node, "on_node_loss": p.on_node_loss}
        nodes = tuple(n.as_dict() for n in self.nodes(t0_ns))
        return replace(
            results,
            config=replace(results.config, placement=placement),
            client=replace(results.client, nodes=nodes),
        )

    def agent_of(self, worker: int) -> Any:
        """Worker ``worker``'s agent actor (tests freeze or remove it)."""
        return self._node_of[worker].agent

    # --- pumping --------------------------------------------------------------------------------

    def _pump(self, node: _Node) -> None:
        """One collect outstanding for ``node``; its messages into the local pipes (blocking when the face is
        behind: then this node's collects wait, its pipes fill and its workers coalesce)."""
        open_ = set(node.workers)
        p = self.placement
        while open_ and not self._closing.is_set():
            issued = time.monotonic()
            ref = node.agent.collect.remote(COLLECT_WAIT_S)
            said_silent = False
            while not ray.wait([ref], timeout=0.1)[0]:
                waited = time.monotonic() - issued
                if self._closing.is_set():
                    return
                if waited >= p.lost_after_s:
                    self._lose(node, open_)
                    return
                if waited >= p.silent_after_s and not said_silent:
                    said_silent = True
                    self._on_notice(f"node {node.host} silent for {p.silent_after_s:g} s")
            try:
                items = ray.get(ref)
            except Exception:
                if not self._closing.is_set():
                    self._lose(node, open_)
                return
            for i, raw in items:
                if i not in open_:
                    continue
                conn = self._writers[i]
                try:
                    if raw == CLOSED:
                        open_.discard(i)
                        conn.close()
                    else:
                        conn.send_bytes(raw)
                except OSError:
                    open_.discard(i)

    def _lose(self, node: _Node, open_: set[int]) -> None:
        node.lost_at_ns = at = time.perf_counter_ns()
        last = pickle.dumps(WorkerLost(node.host, at, tuple(node.workers)), protocol=pickle.HIGHEST_PROTOCOL)
        for i in sorted(open_):
            with contextlib.suppress(OSError):
                self._writers[i].send_bytes(last)
                self._writers[i].close()
        open_.clear()
        with contextlib.suppress(Exception):
            ray.kill(node.agent, no_restart=True)

    def _kill_agents(self) -> None:
        for node in self._nodes:
            if node.agent is not None:
                with contextlib.suppress(Exception):
                    ray.kill(node.agent, no_restart=True)


def ray_check(address: str, url: str | None) -> list[str]:
    """`tokentop ray-check`: a line per live node (versions, CPUs, clock against this machine's, whether it
    reaches ``url``). A version mismatch raises `PoolError` naming the node."""
    connect(address)
    nodes = alive_nodes()
    placement = RayPlacement(address=address)
    for node in nodes:
        node.agent = start_agent(node, placement)
    try:
        infos = ray.get([n.agent.info.remote() for n in nodes], timeout=START_TIMEOUT_S)
        face = face_versions()
        tls = os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true")
        secrets = "" if tls else "; Ray's TLS is off: an API key crosses its connections unencrypted"
        lines = [
            f"this machine: tokentop {face['tokentop']}, Python {face['python']}, Ray {face['ray']}; "
            f"{len(nodes)} live node(s){secrets}"
        ]
        for node, info in zip(nodes, infos, strict=True):
            host = str(info.get("host") or node.host)
            if (line := version_mismatch(host, info)) is not None:
                raise PoolError(line)
            clock = agent_clock(node.agent, info)
            if clock.same_host:
                when = "same clock as this machine"
            else:
                when = f"clock offset {clock.offset_ms:+.3f} ms within {clock.bound_ms:.3f} ms"
            reach = ""
            if url:
                why = ray.get(node.agent.reaches.remote(url), timeout=START_TIMEOUT_S)
                reach = f"; reaches {url}" if not why else f"; CANNOT reach {url}: {why}"
            lines.append(
                f"node {host} ({node.node_id[:8]}): tokentop {info.get('tokentop')}, Python "
                f"{info.get('python')}, Ray {info.get('ray')}, {node.cpus} CPUs; {when}{reach}"
            )
        return lines
    finally:
        for node in nodes:
            with contextlib.suppress(Exception):
                ray.kill(node.agent, no_restart=True)


def _files_of(spec: WorkerSpec) -> dict[str, bytes]:
    """The files a spec names by path (CA bundle, tokenizer, dataset), read here to ship to other hosts."""
    paths = [spec.target.ca_cert, spec.workload.tokenizer]
    if spec.workload.dataset is not None:
        paths.append(spec.workload.dataset.path)
    return {p: Path(p).read_bytes() for p in paths if p}


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return (text.splitlines() or [type(exc).__name__])[0][:300]
