"""A simulated OpenAI-compatible streaming server with a continuous-batching performance model.

- `perf_model`: profiles (`small-gpu`, `large-model`, `tiny-cpu`, `flat`), the step-time roofline and the pure
  scheduler (slots, KV budget, chunked prefill, preemption). No I/O; unit-tested on its own.
- `server`: `serve` and `run_from_args` for `tokentop sim`, wiring `config`, `http` (HTTP/1.1 on asyncio),
  `openai_api` (validation, errors), `generation` (one request's output), `stepper`, `simulator` (routing,
  admission, counters) and `truth` (the ground-truth log).
- `launch`: `SimServer`, which runs `python -m tui.sim --port 0 ...` in a subprocess (demo and tests).
- `prometheus`: the vLLM-named `/metrics` text; `flags`: every `tokentop sim` flag (`python -m tui.sim`).
- `dcgm`: the simulated GPU's DCGM figures; `faults`, `response_text`: fault injection and the seeded
  generated words.

Standalone: imports neither textual, rich nor plotext, nor anything from `tui.engine` or `tui.app` (a test
enforces it); stdlib and orjson only.
"""
