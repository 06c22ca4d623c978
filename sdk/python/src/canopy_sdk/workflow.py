"""Workflow steps: a handler declared with :meth:`DataSource.add_workflow_step` runs for the
``plugin`` steps of workflow runs that name it, receives a :class:`StepContext` (the run's
record, its context so far, the step's settings) and answers a :class:`StepOutput` (an option
and values)."""

from __future__ import annotations

import json
from typing import Any, Optional

from . import _wit
from .data import JSON, Caller, CollectionRef, Context
from .errors import NotFoundError, ValidationError


class StepContext:
    """What a workflow step handler receives: the run's user and collection, the run's record
    (by its packed id), the run's context and the step's settings."""

    def __init__(self, context: Context, record_id: str, run_context: JSON, settings: JSON,
                 schema: Optional[Any] = None) -> None:
        self.context = context
        #: The run's record, by its packed id (``"42"``; composite keys joined with ``|``).
        self.record_id = record_id
        #: The run's context so far: each earlier step's values under its key.
        self.run_context = run_context
        #: The step's ``settings`` from the workflow definition (``None`` when it has none).
        self.settings = settings
        self._schema = schema

    @property
    def caller(self) -> Caller:
        """The run's user: data calls run with their permissions."""
        return self.context.caller

    def collection(self) -> CollectionRef:
        """The workflow's collection."""
        return self.context.this()

    def setting(self, key: str) -> JSON:
        """One setting (``None`` when absent)."""
        return self.settings.get(key) if isinstance(self.settings, dict) else None

    def record_filter(self) -> JSON:
        """A condition tree matching the run's record: each primary key of the collection (from
        the schema, in order) equal to its part of the packed id."""
        name = self.collection().name
        schema = self._schema
        if schema is None:
            _wit.require("StepContext.record_filter")
            schema = json.loads(_wit.environment.schema())
        keys = [f.get("name") for c in schema.get("collections", []) if c.get("name") == name
                for f in c.get("fields", []) if f.get("isPrimaryKey") is True]
        parts = self.record_id.split("|")
        if not keys or len(keys) != len(parts):
            raise ValidationError(
                f"the record id `{self.record_id}` does not fit the primary key of `{name}`")
        # Ids cross as the text the routes serve; the host reads numbers given as text exactly.
        conditions = [{"field": k, "operator": "Equal", "value": p} for k, p in zip(keys, parts)]
        return conditions[0] if len(conditions) == 1 else {"aggregator": "And",
                                                           "conditions": conditions}

    def get_record(self, fields: list[str]) -> dict[str, JSON]:
        """The run's record with these fields (relation paths allowed); :class:`NotFoundError`
        when it does not exist or the run's user cannot see it."""
        rows = self.collection().list(self.record_filter(), fields)
        if not len(rows):
            raise NotFoundError(
                f"record `{self.record_id}` of `{self.context.collection_name or ''}` not found")
        return rows.record(0)


class StepOutput:
    """A step's answer: the option chosen (the key of the step the run goes to next; ``None``
    follows the step's ``next``) and values kept in the run's context under the step's key."""

    def __init__(self, option: Optional[str] = None,
                 values: Optional[dict[str, JSON]] = None) -> None:
        self.option = option
        self.values: dict[str, JSON] = dict(values or {})

    @classmethod
    def next(cls) -> StepOutput:
        """No option and no values: the run goes on to the step's ``next``."""
        return cls()

    @classmethod
    def choose(cls, option: str) -> StepOutput:
        """Chooses ``option``: the run goes to the step with that key."""
        return cls(option)

    def value(self, key: str, value: JSON) -> StepOutput:
        """Adds one value to keep in the run's context; returns the output."""
        self.values[key] = value
        return self
