"""The one way models become plain dicts (JSON output, the store's documents) and back.

A frozen dataclass that inherits :class:`Serial` gets ``to_dict`` and ``from_dict``, both
driven by its fields and their type hints; the JSON Schemas in ``perfgate/schemas`` are the
contract they keep (``tests/test_serial.py`` holds their shapes byte for byte).

Writing:

* the keys are the fields, in field order, unless the class lists them in ``KEYS``: each a
  field or a property (written by its return type, never read) by name, or ``"key=attr"``
  for a key named other than its attribute (``"min=minimum"``);
* a nested dataclass becomes a dict, or a list of its fields in order when it sets
  ``ROW = True`` (a timeline's spans, 10^4 to a step); tuples and lists become lists, sets
  sorted lists, mappings dicts (sorted by key where the field's metadata is :data:`SORTED`),
  enums their value, datetimes ISO 8601 text, paths text;
* numbers are written as they are, unrounded, NaN and infinities included: the store refuses
  those (``allow_nan=False``), each renderer decides how to show them.

Reading coerces each value to its declared type (``"3"`` to ``int``, a list to a tuple, text
to an enum; a value of a union of scalars, such as a parameter, is kept when it is one of
them, else made text), takes a field's default when its key is absent (a document written
before the field existed), raises ``KeyError`` when a field without a default is absent, and
ignores keys it does not know (the computed ones).
"""

from __future__ import annotations

import dataclasses
import operator
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, TypeVar

__all__ = ["SORTED", "Serial", "from_dict", "to_dict"]

SORTED: Mapping[str, Any] = types.MappingProxyType({"sorted": True})
"""Field metadata: write this mapping sorted by key (``field(metadata=SORTED)``)."""

T = TypeVar("T")
S = TypeVar("S", bound="Serial")

Code = Callable[[Any], Any]


class Serial:
    """Gives a dataclass ``to_dict()`` and ``from_dict(data)`` (see the module docstring)."""

    KEYS: ClassVar[tuple[str, ...]] = ()
    """The keys written, in order (``"key=attr"`` renames); empty: every field in order."""
    ROW: ClassVar[bool] = False
    """Nested in another, written as a list of the fields' values rather than a dict."""

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any]) -> S:
        return from_dict(cls, data)


@dataclasses.dataclass(frozen=True)
class _Key:
    key: str
    attr: str
    encode: Code | None
    """None: written as it is."""
    decode: Code | None
    """None for a property or a field not passed to ``__init__``: written, never read."""
    required: bool


_LAYOUTS: dict[type[Any], tuple[_Key, ...]] = {}


def _layout(cls: type[Any]) -> tuple[_Key, ...]:
    """How ``cls`` is written and read, worked out from its fields' hints once."""
    found = _LAYOUTS.get(cls)
    if found is None:
        found = _LAYOUTS[cls] = tuple(_read_layout(cls))
    return found


def _read_layout(cls: type[Any]) -> Iterator[_Key]:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for entry in getattr(cls, "KEYS", ()) or tuple(fields):
        key, _, attr = entry.partition("=")
        attr = attr or key
        f = fields.get(attr)
        if f is not None:
            required = f.default is f.default_factory is dataclasses.MISSING
            encode = _encoder(hints[attr], sort=bool(f.metadata.get("sorted")))
            yield _Key(key, attr, encode, _decoder(hints[attr]) if f.init else None, required)
        elif isinstance(prop := getattr(cls, attr, None), property) and prop.fget:
            yield _Key(key, attr, _encoder(typing.get_type_hints(prop.fget)["return"]), None, False)
        else:
            raise TypeError(f"{cls.__name__}.KEYS names {attr!r}: no field or property")


def to_dict(obj: Any) -> dict[str, Any]:
    """``obj``, a dataclass, as a dict of JSON values (see the module docstring)."""
    out: dict[str, Any] = {}
    for k in _layout(type(obj)):
        value = getattr(obj, k.attr)
        out[k.key] = value if k.encode is None else k.encode(value)
    return out


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """The ``cls`` (a dataclass) a dict written by :func:`to_dict` holds.

    Raises:
        KeyError: a field without a default is absent.
        ValueError, TypeError: a value is not of its field's type.
    """
    kwargs: dict[str, Any] = {}
    for k in _layout(cls):
        if k.decode is None:
            continue
        if k.key in data:
            kwargs[k.attr] = k.decode(data[k.key])
        elif k.required:
            raise KeyError(k.key)
    return cls(**kwargs)


def _members(hint: Any) -> tuple[tuple[Any, ...], bool] | None:
    """A union's members other than None, and whether None is one; None if not a union."""
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return None
    args = typing.get_args(hint)
    members = tuple(a for a in args if a is not type(None))
    return members, len(members) < len(args)


def _encoder(hint: Any, sort: bool = False) -> Code | None:
    """How a value of type ``hint`` is written; None: as it is."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if (union := _members(hint)) is not None:
        inner = _encoder(union[0][0]) if len(union[0]) == 1 else None  # else: scalars
        return None if inner is None else (lambda v: None if v is None else inner(v))
    if isinstance(hint, type):
        if issubclass(hint, Enum):
            return lambda v: getattr(v, "_value_", v)  # .value, 10x faster: 10^4 spans
        if dataclasses.is_dataclass(hint):
            if not getattr(hint, "ROW", False):
                return to_dict
            values = operator.attrgetter(*(k.attr for k in _layout(hint)))
            encoders = tuple((i, k.encode) for i, k in enumerate(_layout(hint)) if k.encode)

            def row(value: Any) -> list[Any]:
                out = list(values(value))
                for i, encode in encoders:
                    out[i] = encode(out[i])
                return out

            return row
        if hint is datetime:
            return datetime.isoformat
        if hint is Path:
            return str
    if origin in (tuple, list):
        item = _encoder(args[0]) if args and all(a in (args[0], Ellipsis) for a in args) else None
        return list if item is None else (lambda v: [item(x) for x in v])
    if origin in (frozenset, set):
        return sorted
    if origin in (Mapping, dict):
        value = _encoder(args[1])
        if sort:
            return lambda v: {k: x if value is None else value(x) for k, x in sorted(v.items())}
        return dict if value is None else (lambda v: {k: value(x) for k, x in v.items()})
    return None


def _decoder(hint: Any) -> Code:
    """How a value of type ``hint`` is read back (coerced to it)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if (union := _members(hint)) is not None:
        members, optional = union
        if len(members) == 1:
            inner = _decoder(members[0])
            return (lambda v: None if v is None else inner(v)) if optional else inner
        # A union of scalars (a parameter, a piece of evidence): kept when it is one of them.
        accepted = (*members, *(int for m in members if m is float), *[type(None)] * optional)
        return lambda v: v if isinstance(v, accepted) else str(v)
    if hint in (str, int, float, bool):
        return typing.cast(Code, hint)
    if isinstance(hint, type):
        if issubclass(hint, Enum):
            members_of = hint._value2member_map_  # hint(v), 5x faster: 10^4 spans
            return lambda v: members_of[v] if v in members_of else hint(v)
        if dataclasses.is_dataclass(hint):
            if getattr(hint, "ROW", False):  # a row of scalars, never of its own class
                decoders = tuple(k.decode or (lambda x: x) for k in _layout(hint))
                return lambda v: hint(*[d(x) for d, x in zip(decoders, v, strict=True)])
            return lambda v: from_dict(hint, v)  # late: a class may name itself
        if hint is datetime:
            return datetime.fromisoformat
        if hint is Path:
            return Path
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda v: tuple(map(item, v))
        items = tuple(_decoder(a) for a in args)
        return lambda v: tuple(d(x) for d, x in zip(items, v, strict=True))
    if origin in (frozenset, set, list):
        item, make = _decoder(args[0]), origin
        return lambda v: make(map(item, v))
    if origin in (Mapping, dict):
        key, value = _decoder(args[0]), _decoder(args[1])
        return lambda v: {key(k): value(x) for k, x in v.items()}
    return lambda v: v
