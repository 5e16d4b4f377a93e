"""tokentop's own telemetry, served from the face process: its `/metrics` for Prometheus (`prometheus`,
`endpoint`) and a span per request for an OpenTelemetry collector (`otlp`). Both read what the engine already
keeps (a `Snapshot`, the finished records), never a chunk."""
