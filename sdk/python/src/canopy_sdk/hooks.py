"""Hooks: positions, operations and the :class:`HookContext` a hook handler receives."""

from __future__ import annotations

import enum
from typing import Any, Optional

from .data import JSON, Caller, Context


class Position(str, enum.Enum):
    """Before or after the operation."""

    BEFORE = "Before"
    AFTER = "After"


class Operation(str, enum.Enum):
    """The operation a hook wraps."""

    LIST = "List"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    AGGREGATE = "Aggregate"


class HookContext:
    """The operation's context as the agent's JSON. A Before Create hook may change
    :attr:`data` in place and a Before Update hook :attr:`patch`; raise a
    :class:`~canopy_sdk.ValidationError` (or another :class:`~canopy_sdk.CanopyError`) to stop
    the operation with that message."""

    def __init__(self, context: Context, position: Position, operation: Operation,
                 payload: dict[str, Any]) -> None:
        self.context = context
        self.position = position
        self.operation = operation
        self.payload = payload

    @property
    def caller(self) -> Caller:
        """The request's caller."""
        return self.context.caller

    def get(self, key: str) -> JSON:
        """A context property (``filter``, ``projection``, ``records``, ``data``, ``patch``,
        ``aggregation``, ``limit``, ``aggregateResult``); ``None`` when the operation has none."""
        return self.payload.get(key)

    @property
    def data(self) -> list[dict[str, JSON]]:
        """The records to create (Before/After Create), editable in place; ``[]`` otherwise."""
        data = self.payload.get("data")
        return data if isinstance(data, list) else []

    @property
    def patch(self) -> dict[str, JSON]:
        """The patch of an update (Before/After Update), editable in place; ``{}`` otherwise."""
        patch = self.payload.get("patch")
        return patch if isinstance(patch, dict) else {}

    def change(self) -> Optional[JSON]:
        """What a Before Create/Update hook hands back: the (possibly changed) data or patch."""
        if self.position is Position.BEFORE and self.operation is Operation.CREATE:
            return self.payload.get("data")
        if self.position is Position.BEFORE and self.operation is Operation.UPDATE:
            return self.payload.get("patch")
        return None
