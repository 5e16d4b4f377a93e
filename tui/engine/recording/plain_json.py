"""A generic JSON form for the engine's plain data (NamedTuples, dataclasses, arrays, bytes, paths), so a
session records each worker `Batch` and the run's config whole, and a field added to them later rides along
with no change here.

A NamedTuple or dataclass is written as ``{"~": "Name", "v": [field values]}`` and its field names once in
the session's header (`schema`); a reader maps values to the current class by field name, so a field added
since fills with its default and one removed is dropped. Only classes of the allowed modules are rebuilt.
"""

from __future__ import annotations

import base64
import dataclasses
import importlib
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import accumulate
from operator import attrgetter
from pathlib import PurePath
from typing import Any

MODULES = (
    "tui.engine.wire",
    "tui.engine.records",
    "tui.engine.config",
)
"""Where the classes a session may name live (nothing else is ever constructed from a file)."""


def recordable_classes() -> list[type]:
    """Every NamedTuple and dataclass of the `MODULES`: what a session's values can be made of."""
    out = []
    for module in MODULES:
        for value in vars(importlib.import_module(module)).values():
            mine = isinstance(value, type) and value.__module__ == module
            if mine and (hasattr(value, "_fields") or dataclasses.is_dataclass(value)):
                out.append(value)
    return out


class CodecError(ValueError):
    """A value the codec cannot write, or a tag it cannot read."""


def _fields_of(value: object) -> tuple[str, ...] | None:
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return tuple(type(value)._fields)  # type: ignore[attr-defined]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclasses.fields(value))
    return None


class Encoder:
    """Turns plain data into JSON-ready values, noting each class's field names for the header.

    It runs on the face for every worker batch, so a class's shape (name, field getter, dropped fields) is
    worked out once per class, and stamps are differenced by numpy, not per chunk in Python."""

    def __init__(self, *, drop: Mapping[str, Iterable[str]] | None = None) -> None:
        """``drop``: per class name, fields written as their class default (the API key, token text)."""
        self.schema: dict[str, list[str]] = {}
        self._drop = {name: frozenset(fields) for name, fields in (drop or {}).items()}
        self._shapes: dict[type, _Shape | None] = {}

    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        cls = type(value)
        shape = self._shapes.get(cls, _UNSEEN)
        if shape is _UNSEEN:
            shape = self._shapes[cls] = self._shape(value)
        if shape is not None:
            name, names, fields_of, blanks = shape
            if name not in self.schema:
                self.schema[name] = list(names)
            values = fields_of(value)
            if blanks:
                values = [
                    _blanked(blanks[f], value, f, v) if f in blanks else v
                    for f, v in zip(names, values, strict=True)
                ]
            # plain values written as they are, without a call each (most fields of a batch are)
            return {"~": name, "v": [v if type(v) in _PLAIN else self.encode(v) for v in values]}
        if isinstance(value, array):
            if value.typecode == "q":  # stamps: their differences, as numbers, compress best
                return {"~q": _deltas(value)}
            return {"~a": value.typecode, "b": base64.b64encode(value.tobytes()).decode()}
        if isinstance(value, bytes | bytearray | memoryview):
            return {"~b": base64.b64encode(bytes(value)).decode()}
        if isinstance(value, PurePath):
            return {"~p": str(value)}
        if isinstance(value, tuple):
            return {"~t": [self.encode(v) for v in value]}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, Mapping):
            return {"~d": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if hasattr(value, "tolist"):  # a numpy array or scalar
            return self.encode(value.tolist())
        raise CodecError(f"cannot record a {type(value).__name__}")

    def _shape(self, value: object) -> _Shape | None:
        """How to write ``value``'s class field by field, or None when it is no NamedTuple or dataclass."""
        names = _fields_of(value)
        if names is None:
            return None
        fields_of: Callable[[Any], Sequence[Any]]
        if isinstance(value, tuple):
            fields_of = _same
        elif len(names) == 1:
            fields_of = partial(_one, names[0])
        else:
            fields_of = attrgetter(*names)
        name = type(value).__name__
        blanks = {f: _class_blank(type(value), f) for f in self._drop.get(name, ())}
        return name, names, fields_of, blanks


_Shape = tuple[str, tuple[str, ...], "Callable[[Any], Sequence[Any]]", dict[str, Any]]
"""A class's name, field names, a getter of its field values in that order, and the fields it drops with
the blank each is written as (`_UNSEEN`: found per value, `_blank`)."""
_UNSEEN: Any = object()
_OF_TYPE: Any = object()
"""A NamedTuple's field without a default: blanked as its value's type's empty value, as `_blank` does."""
_PLAIN = frozenset({type(None), bool, int, float, str})


def _blanked(blank: Any, owner: object, name: str, value: Any) -> Any:
    """What a dropped field is written as (``blank``: its `_class_blank`)."""
    if blank is _OF_TYPE:
        return type(value)()
    return _blank(owner, name) if blank is _UNSEEN else blank


def _class_blank(cls: type, name: str) -> Any:
    """A dropped field's class default when the class has a fixed one, `_OF_TYPE` for a NamedTuple's field
    without one, else `_UNSEEN`."""
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name and f.default is not dataclasses.MISSING:
                return f.default
        return _UNSEEN
    return getattr(cls, "_field_defaults", {}).get(name, _OF_TYPE)


def _same(value: Any) -> Any:
    return value


def _one(name: str, value: Any) -> tuple[Any]:
    return (getattr(value, name),)


def _deltas(values: array[int]) -> list[int]:
    """``values`` as its first value and then each one's difference from the one before."""
    if not values:
        return []
    # here, not at the top: `tui.cli` reaches this module before it sets OPENBLAS_NUM_THREADS
    import numpy as np

    x = np.frombuffer(values, dtype=np.int64)
    out = np.empty_like(x)
    out[0] = x[0]
    np.subtract(x[1:], x[:-1], out=out[1:])
    return out.tolist()  # type: ignore[no-any-return]


def _blank(value: object, name: str) -> Any:
    """A dropped field's class default ("" for text, None for a secret)."""
    for f in dataclasses.fields(value) if dataclasses.is_dataclass(value) else ():
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    defaults = getattr(type(value), "_field_defaults", {})
    if name in defaults:
        return defaults[name]
    return type(getattr(value, name))()


class Decoder:
    """Rebuilds values written by `Encoder` with the current classes (``schema``: the writer's field
    names)."""

    def __init__(self, schema: Mapping[str, list[str]]) -> None:
        self.schema = dict(schema)
        self._classes: dict[str, type] = {}

    def _class(self, name: str) -> type:
        if name not in self._classes:
            for module in MODULES:
                cls = getattr(importlib.import_module(module), name, None)
                if isinstance(cls, type) and (hasattr(cls, "_fields") or dataclasses.is_dataclass(cls)):
                    self._classes[name] = cls
                    break
            else:
                raise CodecError(f"unknown record type {name!r}")
        return self._classes[name]

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        if not isinstance(value, dict):
            return value
        if "~" in value:
            return self._build(value["~"], value["v"])
        if "~q" in value:
            return array("q", accumulate(value["~q"]))
        if "~a" in value:
            out = array(value["~a"])
            out.frombytes(base64.b64decode(value["b"]))
            return out
        if "~b" in value:
            return base64.b64decode(value["~b"])
        if "~p" in value:
            return PurePath(value["~p"])
        if "~t" in value:
            return tuple(self.decode(v) for v in value["~t"])
        if "~d" in value:
            return {_hashable(self.decode(k)): self.decode(v) for k, v in value["~d"]}
        raise CodecError(f"unknown tag in {sorted(value)!r}")

    def _build(self, name: str, values: list[Any]) -> Any:
        cls = self._class(name)
        written = self.schema.get(name)
        if written is None:
            raise CodecError(f"record type {name!r} is not in the header's schema")
        current = (
            list(cls._fields)
            if hasattr(cls, "_fields")
            else [f.name for f in dataclasses.fields(cls) if f.init]
        )
        by_name = dict(zip(written, values, strict=False))
        kwargs = {f: self.decode(by_name[f]) for f in current if f in by_name}
        return cls(**kwargs)


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
