"""User-facing errors (one clear line saying what was wrong and what was expected), and the type check of config
values."""

from __future__ import annotations


class DocattnError(Exception):
    """Base of every error docattn reports to a user (the CLI prints it as one line, exit 2)."""


class DataError(DocattnError):
    """Input data is malformed, empty or inconsistent (names the file, line or member)."""


class CheckpointError(DocattnError):
    """A run directory or weights file is missing, truncated or does not match its config."""


class WriteError(DocattnError):
    """A file could not be written (no space left, a read-only folder); nothing it would replace changed."""


class ConfigError(DocattnError, ValueError):
    """An option or hyper-parameter has an invalid value (a ValueError too, as Python code expects)."""


class Diverged(DocattnError):
    """Training's loss and weights became NaN or infinite before any validation could be kept."""


class Interrupted(DocattnError):
    """Training stopped by SIGINT or SIGTERM; the CLI exits 128 + ``signal`` (130, 143), never 0."""

    def __init__(self, message: str, signal: int, where: str | None = None):
        super().__init__(message)
        self.signal = signal
        self.where = where or message  # where training stood, without advice on what to run next

    def __reduce__(self):  # from a benchmark's worker process to the main one, arguments intact
        return type(self), (str(self), self.signal, self.where)


def checked_values(cls, values: dict) -> dict:
    """``values`` for fields of config dataclass ``cls``, checked against its annotations.

    Command-line values arrive as parsed JSON or plain strings, so ``min_count=abc`` or
    ``lowercase=maybe`` must be named here, not surface as a TypeError mid-run or count as true.
    Whole numbers widen to float, numpy scalars become Python ones, lists become tuples where declared.
    """
    import typing

    hints = typing.get_type_hints(cls)
    out = {}
    for name, value in values.items():
        ok, out[name] = _conform(value, hints.get(name, typing.Any))
        if not ok:
            raise ConfigError(f"{name} must be {_describe(hints[name])}, got {value!r}")
    return out


def checked_fields(instance) -> None:
    """``checked_values`` on a config dataclass's own fields, converting them in place (from __post_init__)."""
    import dataclasses

    given = {f.name: getattr(instance, f.name) for f in dataclasses.fields(instance)}
    for name, value in checked_values(type(instance), given).items():
        if value is not given[name]:
            object.__setattr__(instance, name, value)


def _conform(value, hint):
    """(whether ``value`` fits ``hint``, the value converted to it: numpy scalars to Python, lists to tuples)."""
    import numbers
    import types
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            ok, converted = _conform(value, arg)
            if ok:
                return True, converted
        return False, value
    if hint is type(None):
        return value is None, value
    is_bool = type(value).__name__ in ("bool", "bool_")  # Python's and numpy's (an Integral, but no count)
    if hint is bool:
        return is_bool, bool(value) if is_bool else value
    if hint is int:
        ok = isinstance(value, numbers.Integral) and not is_bool
        return ok, int(value) if ok and type(value) is not int else value
    if hint is float:
        ok = isinstance(value, numbers.Real) and not is_bool
        return ok, float(value) if ok and type(value) is not float else value
    if hint is str:
        return isinstance(value, str), value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False, value
        items = args[:1] * len(value) if origin is list or args[1:] == (Ellipsis,) else args
        if origin is tuple and len(items) != len(value):
            return False, value
        pairs = [_conform(v, h) for v, h in zip(value, items)] if items else [(True, v) for v in value]
        if not all(ok for ok, _ in pairs):
            return False, value
        converted = origin(c for _, c in pairs)
        return True, value if converted == value and type(value) is origin else converted
    return True, value  # anything else (Any, Literal, classes) is left to the code that uses it


def _describe(hint) -> str:
    import types
    import typing

    names = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "a string",
        type(None): "null (unset)",
    }
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin in (list, tuple):
        inner = _describe(args[0]) if args else "values"
        return f"a list of {inner.removeprefix('a ')}s" if inner.startswith("a ") else f"a list of {inner}"
    return names.get(hint, getattr(hint, "__name__", str(hint)))
