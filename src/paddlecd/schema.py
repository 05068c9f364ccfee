"""JSON Schema validation of user files, with errors a person can act on.

One place turns the first jsonschema error into a one-line cause naming the file and the location,
and a hint: unknown keys and unknown enum values get a "did you mean" (difflib), anything else
points at the schema file. Used for images/variants.yaml, train.yaml job files and pipelines/*.yaml.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

import jsonschema

from paddlecd.errors import ConfigError, PaddlecdError, quoted
from paddlecd.types import JsonSchema


def _whole(checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _finite(checker: Any, instance: Any) -> bool:
    if isinstance(instance, bool):
        return False
    return isinstance(instance, int) or (isinstance(instance, float) and math.isfinite(instance))


# JSON Schema's "integer" takes 2.0 ("a number with a zero fractional part", draft 2020-12
# validation §6.1.1), which YAML gives as a float: a trial's job file with `nodes: 2.0` ended in
# a TypeError traceback, and `port: 29500.0` rendered a Service Kubernetes refuses (int32
# fields) and a rendezvous address "…:29500.0". Every paddlecd file takes whole numbers only.
# A "number" is finite: JSON has no NaN or Infinity (RFC 8259 §6), which YAML's .nan/.inf and
# Python's json give; NaN passes every "minimum" (a trial: a pipeline check with rtol: .nan, a
# tolerance no comparison fails).
def _ecma(pattern: str) -> str:
    """``pattern`` with a final ``$`` anchor as ``\\Z``: in ECMA-262, whose regexes JSON
    Schema's "pattern" means (draft 2020-12 validation §6.3.3), ``$`` ends the string; in Python
    it also matches before a final newline (a trial: a job's ``name: "linear-demo\\n"``
    rendered a Kubernetes name with a newline, ``memory: "2Gi\\n"`` ended in a traceback)."""
    if not pattern.endswith("$"):
        return pattern
    body = pattern[:-1]
    backslashes = len(body) - len(body.rstrip("\\"))
    return body + r"\Z" if backslashes % 2 == 0 else pattern


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not re.search(_ecma(pattern), instance):
        yield jsonschema.ValidationError(f"{instance[:200]!r} does not match {pattern!r}")


VALIDATOR = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"pattern": _pattern},
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine_many(
        {"integer": _whole, "number": _finite}))


def load_schema(name: str) -> JsonSchema:
    """The packaged schema ``src/paddlecd/schemas/<name>`` as a dict."""
    return json.loads(resources.files("paddlecd").joinpath(f"schemas/{name}").read_text())


def where(e: jsonschema.ValidationError) -> str:
    """The error's location as ``stages[1].stage`` (``(top level)`` for the document itself)."""
    parts = [f"[{p}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path]
    return "".join(parts).lstrip(".") or "(top level)"


def _rank(e: jsonschema.ValidationError) -> tuple[int, int, list[str]]:
    # The most specific problem first: unknown keys and values before the if/then echoes of them.
    order = {"additionalProperties": 0, "enum": 1, "required": 2}
    return order.get(str(e.validator), 3), -len(e.absolute_path), [str(p) for p in e.absolute_path]


# JSON Schema's type names in the words of the YAML and JSON a person writes
_KINDS = {"object": "a mapping (an object)", "array": "a list", "string": "text (a string)",
          "integer": "a whole number", "number": "a number", "boolean": "true or false",
          "null": "null"}


def _fits(schema: Any, value: Any) -> bool:
    """Whether the branch ``schema`` of a oneOf/anyOf is the one for ``value``'s kind: its
    ``type`` is ``value``'s, or it is an ``enum`` of values of ``value``'s type."""
    if not isinstance(schema, Mapping):
        return False
    names = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    kind = schema.get("type")
    if isinstance(kind, str) and kind in names:
        return isinstance(value, names[kind])
    if isinstance(kind, str) and kind in ("number", "integer"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    options = schema.get("enum")
    return isinstance(options, list) and any(type(o) is type(value) for o in options)


def _described(value: Any) -> str:
    """``value`` as the YAML/JSON it was written as (``null``, ``true``, ``a list of 2 items``,
    ``the text 'x'``), never Python's repr (``None``, ``True``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {quoted(value, 40)}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return "a mapping (an object)"
    return type(value).__name__


def check(data: Any, schema_name: str, *, source: str, error: type[PaddlecdError] = ConfigError,
          messages: Mapping[str, str] | None = None,
          schema: Mapping[str, Any] | None = None) -> None:
    """Validate ``data`` against packaged schema ``schema_name``.

    Args:
        source: the file name, first word of every cause.
        schema: the schema to use instead of the packaged file as it is (e.g. one completed from
            a registry in code, like the pipeline stage kinds); ``schema_name`` names it in hints.
        error: the error class to raise (ConfigError, PipelineError…).
        messages: replacement text per jsonschema keyword (e.g.
            ``{"oneOf": "give exactly one of …"}``).

    Raises:
        error: the first (most specific) violation, as one line plus a hint.
    """
    doc = schema if schema is not None else load_schema(schema_name)
    errors = list(VALIDATOR(doc).iter_errors(data))
    if not errors:
        return
    e = min(errors, key=_rank)
    while (e.validator in ("oneOf", "anyOf") and e.context
           and not (messages and str(e.validator) in messages)):
        # trial 20: "variants: 'chnaged' is not valid under any of the given schemas" named no
        # cause; the branch of the value's own kind (text: the enum; a list: the array) does
        fitting = [sub for sub in e.context if _fits(sub.schema, e.instance)] or None
        if fitting is None:
            break
        e = min(fitting, key=_rank)
    at, see = where(e), f"see src/paddlecd/schemas/{schema_name}"
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        allowed = list(e.schema.get("properties", {}))
        extra = next((k for k in e.instance if k not in allowed), "?")
        close = difflib.get_close_matches(str(extra), allowed, n=1)
        hint = (
            f"did you mean '{close[0]}'?"
            if close
            else (
                "allowed keys: " + ", ".join(allowed)
                if allowed
                else f"{at} takes no parameters here: remove it"
            )
        )
        # a key that is no identifier is described, not quoted: a file given by mistake
        # (--job /etc/shadow) must not have its lines printed back
        named = (f"'{extra}'" if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", str(extra))
                 else f"of {len(str(extra))} characters that is no key name")
        raise error(f"{source}: unknown key {named} at {at}", hint)
    if e.validator == "enum" and e.absolute_path and isinstance(e.absolute_path[-1], str):
        key, options = e.absolute_path[-1], [str(v) for v in e.validator_value]
        close = difflib.get_close_matches(str(e.instance), options, n=1)
        raise error(
            f"{source}: unknown {key} '{e.instance}' at {at}",
            # "<key> is one of": the key + "s" made "statuss" (trial 8)
            (f"did you mean '{close[0]}'? " if close else "")
            + f"{key} is one of: " + ", ".join(options),
        )
    if messages and str(e.validator) in messages:
        raise error(f"{source}: {at}: {messages[str(e.validator)]}", see)
    if (e.validator == "type" and isinstance(e.instance, float)
            and not math.isfinite(e.instance)):  # YAML's .inf/.nan: JSON has neither
        raise error(f"{source}: {at} is {e.instance}, not a finite number",
                    f"write a number such as 1.5 ({see})")
    if (e.validator in ("oneOf", "anyOf") and not (messages and str(e.validator) in messages)
            and isinstance(e.validator_value, list)
            and not any(_fits(b, e.instance) for b in e.validator_value)):
        kinds = [("one of: " + ", ".join(map(str, b["enum"]))) if "enum" in b
                 else _KINDS.get(str(b.get("type")), str(b.get("type")))
                 for b in e.validator_value if isinstance(b, Mapping)]
        raise error(f"{source}: {at} is {_described(e.instance)}, not " + " or ".join(kinds), see)
    if e.validator == "uniqueItems" and isinstance(e.instance, list):
        seen: list[Any] = []
        twice = next((x for x in e.instance if x in seen or seen.append(x)), None)
        raise error(f"{source}: {at} lists {_described(twice)} twice", f"list each once ({see})")
    if e.validator == "minItems" and isinstance(e.instance, list) and not e.instance:
        raise error(f"{source}: {at} is an empty list: give at least {e.validator_value}", see)
    if e.validator == "type":  # trial 19: "variants: None is not of type 'object'" for null
        wanted = e.validator_value if isinstance(e.validator_value, list) else [e.validator_value]
        raise error(f"{source}: {at} is {_described(e.instance)}, not "
                    + " or ".join(_KINDS.get(str(w), str(w)) for w in wanted), see)
    if e.validator == "pattern" and isinstance(e.schema, Mapping) and e.schema.get("description"):
        # the rule in words beside the regex (a trial: "'' does not match '^[A-Za-z0-9]…'")
        raise error(f"{source}: {at}: {e.message}", f"{e.schema['description']} ({see})")
    raise error(f"{source}: {at}: {e.message}", see)
