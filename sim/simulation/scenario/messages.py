"""A pydantic error as the one line a user reads: the dotted field, what is wrong, its help."""

from __future__ import annotations

from pydantic_core import ErrorDetails

from mdpsim.simulation.scenario.tables import Table


def one_line(error: ErrorDetails, tables: dict[str, type[Table]]) -> str:
    """One pydantic error as one line: the dotted field, what is wrong, the field's help."""
    loc = [str(part) for part in error["loc"] if not _is_union_tag(part)]
    ctx = error.get("ctx") or {}
    if ctx.get("field"):
        loc.append(ctx["field"])
    dotted = ".".join(loc)
    kind, value = error["type"], error["input"]
    if kind == "scenario":
        problem = ctx["problem"]
        return f"field {dotted}{'' if problem.startswith(':') else ' '}{problem}"
    help_ = _help(loc, tables)
    if len(loc) == 1 and kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"[{dotted}] must be a table, not {type(value).__name__}"
    if kind == "extra_forbidden":
        parent = ".".join(loc[:-1])
        table = tables.get(loc[0])
        fields = f"; fields of [{parent}]: {', '.join(table.model_fields)}" if table else ""
        return f"unknown field {dotted}{fields}"
    if kind == "missing":
        return f"missing field {dotted}{': ' + help_ if help_ else ''}"
    suffix = f" ({help_})" if help_ else ""
    if kind.endswith("_type"):
        expected = _EXPECTED.get(kind, kind.removesuffix("_type"))
        return f"field {dotted} must be {expected}, got {type(value).__name__} {value!r}{suffix}"
    return f"field {dotted} = {value!r} {_problem(error)}{suffix}"


def _is_union_tag(part: str | int) -> bool:
    """pydantic names the member of a union it tried in the location (``str``,
    ``dict[str,any]``); the field is what the user wrote, so the tag is dropped."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


_EXPECTED = {
    "int_type": "int",
    "float_type": "a number",
    "bool_type": "bool (true or false)",
    "string_type": "str",
    "list_type": "a list",
    "dict_type": "a table",
    "model_type": "a table",
}


_PROBLEMS = {
    "greater_than_equal": "must be >= {ge}",
    "greater_than": "must be > {gt}",
    "less_than": "must be < {lt}",
    "less_than_equal": "must be <= {le}",
    "finite_number": "must be a finite number",
}


def _problem(error: ErrorDetails) -> str:
    """What is wrong with a value, from a pydantic constraint error."""
    ctx = error.get("ctx") or {}
    if error["type"] == "literal_error":
        return "must be one of " + ctx["expected"].replace("'", "").replace(" or ", ", ")
    template = _PROBLEMS.get(error["type"])
    return template.format(**ctx) if template else f"is not valid ({error['msg']})"


def _help(loc: list[str], tables: dict[str, type[Table]]) -> str:
    table = tables.get(loc[0])
    if table is None or len(loc) < 2 or loc[1] not in table.model_fields:
        return ""
    return table.model_fields[loc[1]].description or ""
