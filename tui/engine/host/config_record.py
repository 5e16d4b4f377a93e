"""The workload as the results' ``config`` records it: every setting `workload_from_args` built
(length distributions, scenarios, seed, dataset, shared prefix, turns, tokenizer path), so a results file
says what was asked without the command line beside it; whether the ISL probe ran, or why not; and the
`RunInfo` the results are built from."""

from __future__ import annotations

from dataclasses import asdict, fields
from urllib.parse import parse_qsl, urlencode

from tui.engine.config import EngineOptions, LoadTarget, TargetConfig, WorkloadConfig
from tui.engine.host.isl_probe import skip_reason
from tui.engine.redact import HIDDEN, display_url, mask_secret
from tui.engine.results.build import RunInfo
from tui.engine.results.model import IslProbe, Workload


def workload_record(workload: WorkloadConfig) -> Workload:
    """Every field of ``workload`` as the results model's `Workload` (a field added to it later is recorded
    too, in ``extra``), but the probe's measurements, which `isl_probe_record` reports. The tokenizer and
    dataset appear by path only; the dataset with the format, order, entry count and size it was checked
    with."""
    record = asdict(workload)
    record.pop("isl_observations", None)
    known = {f.name for f in fields(Workload)} - {"extra"}
    return Workload(**{k: v for k, v in record.items() if k in known},
                    extra={k: v for k, v in record.items() if k not in known})  # fmt: skip


def endpoint_path_record(path: str | None, api_key: str | None) -> str | None:
    """``--endpoint /PATH`` as the results record it: the path, its query's names but no values, and the
    API key masked should it be in the path itself; None for the flavour's own path."""
    if path is None:
        return None
    route, _, query = path.partition("?")
    route = mask_secret(route, api_key)
    if not query:
        return route
    names = [(name, HIDDEN) for name, _ in parse_qsl(query, keep_blank_values=True)]
    return f"{route}?{urlencode(names)}"


def isl_probe_record(workload: WorkloadConfig, options: EngineOptions) -> IslProbe:
    """Whether the ISL probe was asked for and sent, why it was skipped (None: it was not), and the (words,
    prompt tokens) pairs it measured."""
    skipped = skip_reason(workload) if options.isl_probe else None
    return IslProbe(
        asked=options.isl_probe,
        sent=options.isl_probe and skipped is None,
        skipped=skipped,
        observations=workload.isl_observations,
    )


def run_info(
    target: TargetConfig,
    workload: WorkloadConfig,
    load: LoadTarget,
    *,
    options: EngineOptions,
    workers: int,
    model: str,
    started_at_s: float,
) -> RunInfo:
    """The run as the results describe it, from the configs a face ran with: the secrets in ``target`` are
    left behind here (the URL without credentials, header names only, no API key)."""
    from tui.engine.network import ProxyError
    from tui.engine.stream.transport import StreamTransport, stream_transport

    try:
        carried = stream_transport(target, options.transport)
    except ProxyError:  # the workers fail on it, and say so
        carried = StreamTransport("aiohttp")
    return RunInfo(
        url=display_url(target.base_url),
        model=model,
        endpoint=target.endpoint,
        workload=workload,
        options=options,
        workers=workers,
        load=load,
        started_at_s=started_at_s,
        timeout_s=target.timeout_s,
        header_names=tuple(name for name, _ in target.headers),
        extra_body=target.extra_body,
        demo=target.demo,
        endpoint_path=endpoint_path_record(target.endpoint_path, target.api_key),
        workload_record=workload_record(workload),
        isl_probe=isl_probe_record(workload, options),
        stream_transport=carried.name,
        stream_transport_note=carried.note,
    )
