"""The export destinations: the only list of them. A destination module defines its config model (a subclass of
`base.Destination` with a `type` literal and a `send`) and imports the base, never this registry; a new kind of
destination is one module and one entry here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Field

from eval_platform.export.base import Destination
from eval_platform.export.otlp import OtlpDestination
from eval_platform.export.phoenix import PhoenixDestination

DESTINATION_TYPES: tuple[type[Destination], ...] = (OtlpDestination, PhoenixDestination)

if TYPE_CHECKING:
    AnyDestination = Destination
else:  # a verdict_export.yaml entry: one of DESTINATION_TYPES, told apart by its `type`
    AnyDestination = Annotated[Union[DESTINATION_TYPES], Field(discriminator="type")]  # noqa: UP007
