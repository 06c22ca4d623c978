"""The context of write replacements, and binary modes."""

from __future__ import annotations

import enum
from typing import Any

from .data import JSON, Caller, Context


class WriteAction(str, enum.Enum):
    """Which write a write replacement runs for."""

    CREATE = "create"
    UPDATE = "update"


class BinaryMode(str, enum.Enum):
    """How a binary column crosses the wire."""

    DATA_URI = "datauri"
    """``data:<mime>;base64,…`` (file uploads; the default for columns that are not keys)."""
    HEX = "hex"
    """Lowercase hex (short binaries such as ids; the default for keys)."""


class WriteContext:
    """What a write replacement knows besides the written value."""

    def __init__(self, context: Context, payload: dict[str, Any]) -> None:
        #: The request's caller and collection; ``context.collection(..)`` reads and writes.
        self.context = context
        #: Create or update.
        self.action = WriteAction.UPDATE if payload.get("action") == "update" else WriteAction.CREATE
        record = payload.get("record")
        #: The whole record being created, or the whole patch of an update.
        self.record: dict[str, JSON] = record if isinstance(record, dict) else {}
        #: The filter of the updated records (``None`` on create).
        self.filter: JSON = payload.get("filter")

    @property
    def caller(self) -> Caller:
        """The request's caller."""
        return self.context.caller
