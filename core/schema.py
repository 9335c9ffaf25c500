"""Schemas: a pydantic model or a plain type, validated and shown to the model as JSON Schema."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import UnionType
from typing import TYPE_CHECKING, Any, Generic, overload

import pydantic
from pydantic_core import SchemaError
from typing_extensions import TypeVar

from .errors import DefinitionError, ValidationError

if TYPE_CHECKING:
    from typing import _SpecialForm

__all__ = ("Schema", "as_schema", "external_schema", "format_validation_error")

T_co = TypeVar("T_co", covariant=True, default=Any)
"""The type of the values a schema validates (covariant: a ``Schema[bool]`` is a ``Schema[object]``)."""
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, eq=False)
class Schema(Generic[T_co]):
    """A validator for one value, built from a pydantic model or any type pydantic understands; ``Schema[T]``
    validates values into ``T``."""

    tp: Any
    """The pydantic model or type the value must match."""
    adapter: pydantic.TypeAdapter[T_co] = field(repr=False)
    """The adapter that validates and dumps values of ``tp``."""
    shown: dict[str, Any] | None = None
    """A JSON Schema to show the model instead of the adapter's, as it was given (``external_schema``)."""

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        """The JSON Schema shown to the model."""
        return self.shown if self.shown is not None else self.adapter.json_schema()

    @cached_property
    def json_schema_text(self) -> str:
        """The JSON Schema as compact text, computed once."""
        return json.dumps(self.json_schema, ensure_ascii=False)

    @cached_property
    def is_text(self) -> bool:
        """True when the value is a plain string (content is taken as it is, not parsed as JSON)."""
        return self.tp is str

    def validate(self, value: Any) -> T_co:
        """Validate a Python value; raise our ``ValidationError`` with a readable message."""
        try:
            return self.adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            raise ValidationError(format_validation_error(exc)) from exc

    def validate_text(self, text: str) -> T_co:
        """Validate content written by the model: a string as it is, anything else parsed as JSON."""
        if self.is_text:
            return self.validate(text)
        stripped = text.strip()
        try:
            value = json.loads(stripped) if stripped else None
        except json.JSONDecodeError as exc:
            raise ValidationError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
        return self.validate(value)

    def dump(self, value: Any) -> Any:
        """A JSON-compatible form of a validated value."""
        return self.adapter.dump_python(value, mode="json", by_alias=True)


def format_validation_error(exc: pydantic.ValidationError) -> str:
    """One line per problem: ``location: message``."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(value)"
        lines.append(f"{loc}: {err['msg']}")
    return "; ".join(lines)


_cache: dict[Any, Schema[Any]] = {}

_OBJECT: pydantic.TypeAdapter[dict[str, Any]] = pydantic.TypeAdapter(dict[str, Any])


def _first_line(exc: Exception) -> str:
    """pydantic's message without its links and advice."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _preview(value: Mapping[Any, Any]) -> str:
    """The start of a dict, for an error message."""
    text = repr(dict(value))
    return text if len(text) <= 60 else text[:57] + "..."


def external_schema(json_schema: dict[str, Any]) -> Schema[dict[str, Any]]:
    """A schema that shows ``json_schema`` (written elsewhere: an MCP server's tool) to the model as it is,
    and only checks that a value is a JSON object; whoever owns the schema validates the rest."""
    if not isinstance(json_schema, dict):
        raise DefinitionError(f"a JSON Schema must be an object, got {type(json_schema).__name__}")
    return Schema(tp=dict[str, Any], adapter=_OBJECT, shown=json_schema)


@overload
def as_schema(tp: Schema[T], *, what: str) -> Schema[T]: ...
@overload
def as_schema(tp: type[T], *, what: str) -> Schema[T]: ...
@overload
def as_schema(tp: UnionType | _SpecialForm | object, *, what: str) -> Schema[Any]: ...
def as_schema(tp: Any, *, what: str) -> Schema[Any]:
    """Build (once per type) the ``Schema`` of ``tp``; ``what`` names the definition for error messages."""
    if isinstance(tp, Schema):
        return tp
    if isinstance(tp, Mapping):  # a JSON Schema, or a value where a type was meant
        raise DefinitionError(
            f"{what}: got a dict ({_preview(tp)}) where a pydantic model or a type is expected; pass a model "
            "(class Args(BaseModel): ...), or wrap a JSON Schema written elsewhere in external_schema({...}) "
            "(from core import external_schema) to show it to the model as it is"
        )
    try:
        cached = _cache.get(tp)
    except TypeError:  # unhashable annotation
        cached = None
    if cached is not None:
        return cached
    try:
        schema: Schema[Any] = Schema(tp=tp, adapter=pydantic.TypeAdapter(tp))
        schema.json_schema  # noqa: B018 - fail at definition time, not in the middle of a run
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, SchemaError, TypeError) as exc:
        raise DefinitionError(
            f"{what}: cannot build a schema from {tp!r} (pass a pydantic model or a type): {_first_line(exc)}"
        ) from exc
    with contextlib.suppress(TypeError):
        _cache[tp] = schema
    return schema
