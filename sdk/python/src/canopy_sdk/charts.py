"""Charts: the :class:`ChartContext` a chart handler receives and the :class:`ChartResult`
builders (the spec's eight). The host turns a result into the agent's response shape
(``countCurrent``, ``[{key, value}]``, filled time periods, ...)."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from .data import JSON, Caller, Context
from .errors import InternalError, NotFoundError


class TimeRange(str, enum.Enum):
    """The period of a time-based chart."""

    DAY = "Day"
    WEEK = "Week"
    MONTH = "Month"
    QUARTER = "Quarter"
    YEAR = "Year"


class ChartContext:
    """What a chart handler receives: the caller (their ``timezone`` is the chart's), the record
    of a collection chart and the chart's query parameters."""

    def __init__(self, context: Context, payload: dict[str, Any]) -> None:
        self.context = context
        #: The record's packed id for a collection chart (``"1"``, ``"1|2"``), else ``None``.
        self.record_id: JSON = payload.get("recordId")
        self.record_filter: JSON = payload.get("recordFilter")
        #: The chart's query parameters.
        self.parameters: JSON = payload.get("parameters")

    @property
    def caller(self) -> Caller:
        """The request's caller."""
        return self.context.caller

    def get_record(self, fields: list[str]) -> dict[str, JSON]:
        """The record of a collection chart with these fields."""
        if self.record_id is None:
            raise InternalError("a datasource chart has no record")
        rows = self.context.this().list(self.record_filter, fields)
        if not len(rows):
            raise NotFoundError("Record does not exist")
        return rows.record(0)


Entries = Union[Mapping[str, float], Iterable[tuple[str, float]]]


def _entries(entries: Entries) -> list[JSON]:
    pairs = entries.items() if isinstance(entries, Mapping) else entries
    return [{"key": str(k), "value": v} for k, v in pairs]


class ChartResult:
    """A chart's result; build it with one of the class methods."""

    def __init__(self, data: dict[str, JSON]) -> None:
        self.data = data

    @classmethod
    def value(cls, value: float, previous: Optional[float] = None) -> ChartResult:
        """A single value, with the previous period's for comparison."""
        return cls({"type": "Value", "value": value, "previousValue": previous})

    @classmethod
    def distribution(cls, entries: Entries) -> ChartResult:
        """A distribution (pie): label → number (a dict or ``(label, number)`` pairs)."""
        return cls({"type": "Distribution", "entries": _entries(entries)})

    @classmethod
    def time_based(cls, range: Union[TimeRange, str],
                   points: Iterable[tuple[str, Optional[float]]]) -> ChartResult:
        """Points of one line: ``(ISO date, value)``; missing periods are filled with 0."""
        return cls({"type": "TimeBased", "range": TimeRange(range).value,
                    "points": [{"date": d, "value": v} for d, v in points]})

    @classmethod
    def multiple_time_based(cls, range: Union[TimeRange, str], dates: Iterable[str],
                            lines: Iterable[tuple[str, list[Optional[float]]]]) -> ChartResult:
        """Several lines over the same ISO dates: ``(label, values)``, one value per date."""
        return cls({"type": "MultipleTimeBased", "range": TimeRange(range).value,
                    "dates": list(dates),
                    "lines": [{"label": label, "values": list(v)} for label, v in lines]})

    @classmethod
    def percentage(cls, value: float) -> ChartResult:
        """A percentage."""
        return cls({"type": "Percentage", "value": value})

    @classmethod
    def objective(cls, value: float, objective: float) -> ChartResult:
        """A value against an objective."""
        return cls({"type": "Objective", "value": value, "objective": objective})

    @classmethod
    def leaderboard(cls, entries: Entries) -> ChartResult:
        """A leaderboard: label → number, sorted descending by the host."""
        return cls({"type": "Leaderboard", "entries": _entries(entries)})

    @classmethod
    def smart(cls, data: JSON) -> ChartResult:
        """Free-form data, returned as is."""
        return cls({"type": "Smart", "data": data})

    def to_json(self) -> dict[str, JSON]:
        """The result as the host reads it."""
        return self.data
