"""What every scenario table shares: the strict base model, the positive-number type and the
one-line refusal a validator raises."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def refuse(problem: str, *, field: str | None = None) -> PydanticCustomError:
    """A validation error whose message is ``problem``, optionally located at a sub-field."""
    return PydanticCustomError("scenario", "{problem}", {"problem": problem, "field": field})


class Table(BaseModel):
    """A scenario table: strict types (no ``true`` for an int, no ``"5"`` for a number),
    unknown fields refused, immutable once validated."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
