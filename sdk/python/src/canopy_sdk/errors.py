"""The exceptions of handlers: each one becomes an HTTP status in the agent's error envelope.

Raise them from any handler (``raise ValidationError("Amount must be positive")``). Any other
exception is a bug: the SDK turns it into an :class:`InternalError` (a 500 logged by the host
with the plugin's name) carrying the exception's type, message and where it was raised.
"""

from __future__ import annotations

from typing import Any

from . import _wit


class CanopyError(Exception):
    """A handler's expected failure; the host makes it the request's error response."""

    #: The WIT ``error`` case this exception crosses as.
    kind: str = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def to_wit(self) -> Any:
        """The WIT ``types.error`` value (bindings required)."""
        cases = {
            "validation": _wit.types.Error_Validation,
            "forbidden": _wit.types.Error_Forbidden,
            "not-found": _wit.types.Error_NotFound,
            "unprocessable": _wit.types.Error_Unprocessable,
            "internal": _wit.types.Error_Internal,
        }
        return cases[self.kind](self.message)


class ValidationError(CanopyError):
    """400 ``ValidationError`` (the Node agent's ``throwValidationError``; bad input)."""

    kind = "validation"


class ForbiddenError(CanopyError):
    """403 ``ForbiddenError`` (``throwForbiddenError``)."""

    kind = "forbidden"


class NotFoundError(CanopyError):
    """404 ``NotFoundError``."""

    kind = "not-found"


class UnprocessableError(CanopyError):
    """422 ``UnprocessableError`` (``throwError``)."""

    kind = "unprocessable"


class InternalError(CanopyError):
    """500: a bug or an unexpected state, logged by the host with the plugin's name."""

    kind = "internal"


def from_wit(error: Any) -> CanopyError:
    """The exception for a WIT ``types.error`` value a host call failed with."""
    name = type(error).__name__
    cls = {
        "Error_Validation": ValidationError,
        "Error_Forbidden": ForbiddenError,
        "Error_NotFound": NotFoundError,
        "Error_Unprocessable": UnprocessableError,
    }.get(name, InternalError)
    return cls(str(getattr(error, "value", error)))
