"""The one writer and the one reader of results files.

`write_results` writes a `Results` (or `WatchResults`) as indented JSON, atomically; `read_results` reads a
run's file back as a `Results`, `read_document` either kind. A missing, non-JSON or wrong-shape file raises
`ResultsFileError`: one line that names the file and, for a wrong shape, the key.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import orjson

from tui.engine.results.codec import ResultsFileError, Where, decode, encode
from tui.engine.results.model import Document, Results
from tui.engine.results.watch_model import WatchResults

__all__ = ["ResultsFileError", "dump_results", "read_document", "read_results", "to_json", "write_results"]


def to_json(doc: Document) -> dict[str, Any]:
    """The document as the JSON object the file holds (plain dicts and lists, None for null)."""
    return encode(doc)


def dump_results(doc: Document) -> bytes:
    """The document as indented JSON bytes (NaN becomes null)."""
    return orjson.dumps(encode(doc), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n"


def write_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` whole or not at all (a temporary file beside it, then a rename); a failure
    leaves no stray half file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def write_results(doc: Document, path: Path) -> Path:
    """Write ``doc`` to ``path`` atomically: a crash never leaves half a file, and any engine, real or fake,
    writes the same bytes."""
    return write_atomic(Path(path), dump_results(doc))


def _load(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResultsFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ResultsFileError(f"{path}: is a directory") from None
    except OSError as exc:
        raise ResultsFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ResultsFileError(f"{path}: not JSON: {str(exc).splitlines()[0]}") from None


def parse_document(data: Any, where: object = "results") -> Document:
    """A document from its JSON object (``where`` names it in errors): a watch by its ``mode``."""
    at = Where(where)
    if isinstance(data, dict) and data.get("mode") == "watch":
        return decode(WatchResults, data, at)
    if isinstance(data, dict) and "tool" in data and data["tool"] != "tokentop":
        raise at.error(f"tool is {data['tool']!r}, not 'tokentop'")
    return decode(Results, data, at)


def read_document(path: Path) -> Document:
    """The results file at ``path``, a run's or a watch's; `ResultsFileError` if it is neither."""
    path = Path(path)
    return parse_document(_load(path), path)


def read_results(path: Path) -> Results:
    """The run's results file at ``path``, typed; `ResultsFileError` (a `ValueError`) if it cannot be."""
    doc = read_document(path)
    if isinstance(doc, WatchResults):
        raise ResultsFileError(f"{path}: a watch's results: it has no load levels")
    return doc
