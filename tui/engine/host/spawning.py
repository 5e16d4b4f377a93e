"""Starting an engine worker process from the face: multiprocessing's ``spawn`` context, set up so it works
under a running Textual app (which has threads, so no fork, and a captured sys.stderr)."""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.connection import Connection
from typing import Any

from tui.engine.wire import WorkerSpec


def ensure_resource_tracker() -> None:
    """Start multiprocessing's resource tracker now, on the caller's thread (~20 ms, once per process).

    ``spawn`` starts it lazily and hands it ``sys.stderr.fileno()``; under a running Textual app sys.stderr
    is a capture object without a usable descriptor, and the first spawn fails with "bad value(s) in
    fds_to_keep". Starting it here, with the real stderr put back for the moment if needed, avoids that.
    The swap is safe because this runs on the face's own thread, which is not writing meanwhile.
    """
    from multiprocessing import resource_tracker

    saved = sys.stderr
    try:
        try:
            usable = saved is not None and saved.fileno() >= 0
        except (AttributeError, OSError, ValueError):
            usable = False
        if not usable and sys.__stderr__ is not None:
            sys.stderr = sys.__stderr__
        resource_tracker.ensure_running()
    except Exception:
        pass  # the spawn itself will report a real problem
    finally:
        sys.stderr = saved


def spawn_worker(spec: WorkerSpec) -> tuple[Any, Connection, Connection]:
    """Start worker ``spec.index``; (its process, the command pipe's write end, the data pipe's read end).
    A daemon: multiprocessing ends it if the face exits without stopping it; if the face is killed, the
    worker sees its command pipe close and stops on its own."""
    from tui.engine.load.worker import worker_main

    ctx = multiprocessing.get_context("spawn")
    cmd_r, cmd_w = ctx.Pipe(duplex=False)
    data_r, data_w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=worker_main, args=(spec, cmd_r, data_w), name=f"tokentop-engine-{spec.index}",
                       daemon=True)  # fmt: skip
    proc.start()
    cmd_r.close()
    data_w.close()
    return proc, cmd_w, data_r
