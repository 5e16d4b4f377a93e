"""The UI-free core: load generation, SSE parsing, per-request records, metrics, snapshots.

Never imports textual, rich or plotext (a test enforces it).
"""

import sys

# httpx imports its command-line client (click, rich, pygments) whenever click is installed, which it often
# is (huggingface-hub and many tools depend on it): 350-520 ms instead of 120-160 ms to import httpx here,
# and a UI library in every engine worker, for a CLI tokentop never runs. A None entry makes that one
# optional import fail, which httpx handles (its `httpx` console command then says the CLI extras are
# missing; the library is unaffected).
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
