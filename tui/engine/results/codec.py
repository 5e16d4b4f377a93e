"""The one mapping between the results model's dataclasses and their JSON: each field says its key, and the
writer (`encode`) and the reader (`decode`) both walk the same fields, so a key added to the model is written
and read in one line.

A field's metadata (`key`) says how: ``name`` (the JSON key, default the field's name), ``flat`` (a `Stats`
spread into ``{stat}_{flat}_ms`` keys, vLLM's naming), ``when`` (written only when this holds for the object),
``omit_none`` (no key at all while None), ``presence`` (not in the JSON itself: a flag that the key it names
is there), ``extra`` (a dict that keeps the keys this model does not know, read and written back unchanged,
so a newer file loses nothing here).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")


class ResultsFileError(ValueError):
    """The file is not a readable tokentop results file; the message is one line naming it."""


def key(
    name: str | None = None,
    *,
    flat: str | None = None,
    when: Callable[[Any], bool] | None = None,
    omit_none: bool = False,
    presence: str | None = None,
    extra: bool = False,
) -> dict[str, Any]:
    """A field's JSON metadata (see the module's docstring)."""
    return {"name": name, "flat": flat, "when": when, "omit_none": omit_none, "presence": presence,
            "extra": extra}  # fmt: skip


def _meta(f: dataclasses.Field[Any]) -> Mapping[str, Any]:
    return f.metadata or key()


# --- writing ------------------------------------------------------------------------------------------


def encode(obj: Any) -> dict[str, Any]:
    """The JSON object of a model dataclass, keys in field order, unknown keys (``extra``) last."""
    out: dict[str, Any] = {}
    tail: Mapping[str, Any] = {}
    for f in dataclasses.fields(obj):
        meta = _meta(f)
        value = getattr(obj, f.name)
        if meta["presence"] is not None:
            continue
        if meta["extra"]:
            tail = value
            continue
        if meta["when"] is not None and not meta["when"](obj):
            continue
        if value is None and meta["omit_none"]:
            continue
        if meta["flat"] is not None:
            if value is not None:
                for stat in dataclasses.fields(value):
                    out[f"{stat.name}_{meta['flat']}_ms"] = getattr(value, stat.name)
            continue
        out[meta["name"] or f.name] = _encode_value(value)
    for k, v in tail.items():
        out.setdefault(k, v)
    return out


def _encode_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, tuple | list):
        return [_encode_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _encode_value(v) for k, v in value.items()}
    return value


# --- reading ------------------------------------------------------------------------------------------


class Where:
    """Where in which file a value is, for one-line errors: ``FILE: not a tokentop results file: ...``."""

    def __init__(self, path: object, at: str = "") -> None:
        self.path, self.at = path, at

    def child(self, name: str) -> Where:
        return Where(self.path, f"{self.at}.{name}" if self.at else name)

    def item(self, i: int) -> Where:
        return Where(self.path, f"{self.at}[{i}]")

    def error(self, message: str) -> ResultsFileError:
        return ResultsFileError(f"{self.path}: not a tokentop results file: {message}")

    def suffix(self) -> str:
        return f" at {self.at}" if self.at else ""


@functools.cache
def _hints(cls: Any) -> dict[str, Any]:
    module = sys.modules[cls.__module__]
    return typing.get_type_hints(cls, vars(module))


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    factory: Callable[[], Any] = f.default_factory  # type: ignore[assignment]
    return factory()


def decode(cls: type[T], data: Any, where: Where) -> T:
    """A model dataclass from its JSON object; `ResultsFileError` naming the key for a wrong shape."""
    if not isinstance(data, dict):
        raise where.error(f"expected an object{where.suffix()}, got {type(data).__name__}")
    hints = _hints(typing.cast(Any, cls))
    kwargs: dict[str, Any] = {}
    known: set[str] = set()
    extra_field: str | None = None
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        meta = _meta(f)
        if meta["extra"]:
            extra_field = f.name
            continue
        if meta["presence"] is not None:
            kwargs[f.name] = meta["presence"] in data
            continue
        if meta["flat"] is not None:
            stats_cls = _strip_none(hints[f.name])
            names = [f"{s.name}_{meta['flat']}_ms" for s in dataclasses.fields(stats_cls)]
            known.update(names)
            if not any(n in data for n in names) and _has_default(f):
                continue
            kwargs[f.name] = _decode_flat(stats_cls, data, meta["flat"], where)
            continue
        name = meta["name"] or f.name
        known.add(name)
        if name in data:
            kwargs[f.name] = _convert(hints[f.name], data[name], where.child(name))
        elif not _has_default(f):
            raise where.error(f"no {name!r}{where.suffix()}")
    if extra_field is not None:
        kwargs[extra_field] = {k: v for k, v in data.items() if k not in known}
    obj = cls(**kwargs)
    check = getattr(obj, "check", None)
    problem = check() if callable(check) else None
    if problem:
        raise where.error(f"{problem}{where.suffix()}")
    return obj


def _decode_flat(cls: type[T], data: dict[str, Any], prefix: str, where: Where) -> T:
    hints = _hints(typing.cast(Any, cls))
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        name = f"{f.name}_{prefix}_ms"
        if name in data:
            kwargs[f.name] = _convert(hints[f.name], data[name], where.child(name))
        elif not _has_default(f):
            raise where.error(f"no {name!r}{where.suffix()}")
    return cls(**kwargs)


def _strip_none(tp: Any) -> Any:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return args[0] if _is_union(tp) and len(args) == 1 else tp


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


_NAMES = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}


def _convert(tp: Any, value: Any, where: Where) -> Any:
    """``value`` checked against the annotation ``tp`` (and made a tuple/float where the model says)."""
    if tp is Any:
        return value
    if _is_union(tp):
        options = typing.get_args(tp)
        if value is None:
            if type(None) in options:
                return None
        else:
            for option in options:
                if option is type(None):
                    continue
                try:
                    return _convert(option, value, where)
                except ResultsFileError:
                    if len(options) <= 2:
                        raise
            raise where.error(f"unexpected {value!r}{where.suffix()}")
        raise where.error(f"expected {_describe(options)}{where.suffix()}, got null")
    origin = typing.get_origin(tp)
    if origin is Literal:
        if value not in typing.get_args(tp):
            choices = " or ".join(str(a) for a in typing.get_args(tp))
            raise where.error(f"expected {choices}{where.suffix()}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise where.error(f"expected a list{where.suffix()}, got {value!r}")
        (arg,) = typing.get_args(tp)
        return [_convert(arg, v, where.item(i)) for i, v in enumerate(value)]
    if origin is tuple:
        if not isinstance(value, list):
            raise where.error(f"expected a list{where.suffix()}, got {value!r}")
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, where.item(i)) for i, v in enumerate(value))
        if len(value) != len(args):
            raise where.error(f"expected {len(args)} items{where.suffix()}, got {len(value)}")
        return tuple(_convert(a, v, where.item(i)) for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin in (dict, Mapping) or tp in (dict, Mapping):
        if not isinstance(value, dict):
            raise where.error(f"expected an object{where.suffix()}, got {value!r}")
        args = typing.get_args(tp)
        if args and args[1] is not Any:
            return {k: _convert(args[1], v, where.child(k)) for k, v in value.items()}
        return value
    if dataclasses.is_dataclass(tp):
        return decode(tp, value, where)  # type: ignore[arg-type]
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise where.error(f"expected a number{where.suffix()}, got {value!r}")
        return float(value)
    if tp in (int, str, bool):
        if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
            raise where.error(f"expected {_NAMES[tp]}{where.suffix()}, got {value!r}")
        return value
    raise TypeError(f"the results codec cannot read {tp!r}")  # a model field of a type added without a rule


def _describe(options: tuple[Any, ...]) -> str:
    return " or ".join(_NAMES.get(o, getattr(o, "__name__", str(o))) for o in options if o is not type(None))
