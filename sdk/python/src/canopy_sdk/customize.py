"""The customizer a plugin writes against: :class:`DataSource` and :class:`CollectionCustomizer`
declare customizations and workflow steps, in the order of the agent's customizer.

Every ``add_*``, ``replace_*``, ``override_*`` ... method returns the customizer, so calls chain.
The kinds that take a function also have a decorator form that returns the function unchanged::

    customers = ds.collection("customers")

    @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
    def full_name(rows: Rows, ctx: Context) -> list[str]:
        return [f"{f or ''} {l or ''}" for f, l in zip(rows.text("first_name"),
                                                        rows.text("last_name"))]

Handler ids are positions in declaration order: ``customize`` must be deterministic (same
schema and options, same declarations), since every fresh instance rebuilds its table by running
it again.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, TypeVar, Union

from . import _wit
from .actions import Action, FormElement, Scope
from .charts import ChartContext, ChartResult
from .data import JSON, Column, ColumnKind, Context, Level, Rows, Texts, log
from .hooks import HookContext, Operation, Position
from .workflow import StepContext, StepOutput
from .write import BinaryMode, WriteContext

F = TypeVar("F", bound=Callable[..., Any])


class ColumnType(str, enum.Enum):
    """The primitive column types of a computed field. A composite type is given as its JSON
    form instead (``["String"]``, ``{"street": "String"}``)."""

    STRING = "String"
    NUMBER = "Number"
    BOOLEAN = "Boolean"
    DATE = "Date"
    DATEONLY = "Dateonly"
    TIME = "Time"
    ENUM = "Enum"
    JSON = "Json"
    UUID = "Uuid"
    POINT = "Point"
    FILE = "File"


ColumnTypeLike = Union[ColumnType, str, list[Any], dict[str, Any]]

ComputeFn = Callable[[Rows, Context], Union[Column, Texts, Sequence[Any]]]


def _column_type_json(t: ColumnTypeLike) -> JSON:
    return t.value if isinstance(t, ColumnType) else t


def _column_kind(t: ColumnTypeLike) -> ColumnKind:
    """How a list answered by a computed field of this type crosses."""
    t = _column_type_json(t)
    if t == "Number":
        return ColumnKind.NUMBERS
    if t == "Boolean":
        return ColumnKind.BOOLEANS
    if t in ("Json", "Point") or not isinstance(t, str):
        return ColumnKind.JSON
    return ColumnKind.STRINGS


@dataclass
class ComputedField:
    """A computed field: its type, its dependencies (columns or relation paths such as
    ``customer:firstName``, possibly other computed fields) and the batch function.

    ``compute(rows, ctx)`` receives the de-duplicated dependency rows of one request and returns
    one value per row, in order: a :class:`Column`, a :class:`Texts`, or a plain list converted
    by the column type (strings for text types, floats for ``Number`` — a ``str`` cell makes it
    an exact decimal text column —, booleans, and JSON values for ``Json``, ``Point`` and
    composite types).
    """

    column_type: ColumnTypeLike
    dependencies: Sequence[str]
    compute: ComputeFn
    default_value: JSON = None
    enum_values: Optional[Sequence[str]] = None

    def definition(self) -> JSON:
        return {
            "columnType": _column_type_json(self.column_type),
            "dependencies": list(self.dependencies),
            "defaultValue": self.default_value,
            "enumValues": None if self.enum_values is None else list(self.enum_values),
        }

    def to_column(self, answer: Any) -> Column:
        """The handler's answer as a column."""
        if isinstance(answer, Column):
            return answer
        kind = _column_kind(self.column_type)
        if isinstance(answer, Texts):
            # Packed cells are text: JSON text for JSON types, strings for the others.
            return Column(ColumnKind.JSON if kind is ColumnKind.JSON else ColumnKind.STRINGS,
                          answer)
        cells = list(answer)
        if kind is ColumnKind.NUMBERS:
            if any(isinstance(c, str) for c in cells):
                return Column.strings(None if c is None else str(c) for c in cells)
            return Column.numbers(cells)
        if kind is ColumnKind.BOOLEANS:
            return Column.booleans(cells)
        if kind is ColumnKind.JSON:
            return Column.json(cells)
        return Column(ColumnKind.STRINGS, cells)


SegmentFn = Callable[[Context], JSON]
SearchFn = Callable[[str, bool, Context], JSON]
HookFn = Callable[[HookContext], None]
ChartFn = Callable[[ChartContext], ChartResult]
WriteFn = Callable[[JSON, WriteContext], Optional[dict[str, JSON]]]
OperatorFn = Callable[[JSON, Context], JSON]
CreateFn = Callable[[list[dict[str, JSON]], Context], list[dict[str, JSON]]]
UpdateFn = Callable[[JSON, dict[str, JSON], Context], None]
DeleteFn = Callable[[JSON, Context], None]
StepFn = Callable[[StepContext], Optional[StepOutput]]
ListRecordsFn = Callable[[dict[str, JSON], Context], list[dict[str, JSON]]]


@dataclass
class Handler:
    """One entry of the handler table: what kind of call it answers and the function."""

    kind: str
    fn: Any = None
    position: Optional[Position] = None
    operation: Optional[Operation] = None


@dataclass
class Declaration:
    """One declared customization, as ``customizer.declare`` answers it."""

    collection: Optional[str]
    kind: str
    name: str
    definition: JSON
    handler: int


class DataSource:
    """The datasource being customized: the schema, options and scope, the collection
    customizers, datasource charts, plugins applied on top, and workflow steps."""

    def __init__(self, schema: JSON = None, options: JSON = None,
                 scope: Union[str, None, object] = ...) -> None:
        self._schema = schema
        self._options = options
        self._scope = scope
        self.declarations: list[Declaration] = []
        self.handlers: list[Handler] = []
        self.steps: list[tuple[str, int]] = []

    @property
    def schema(self) -> dict[str, Any]:
        """The datasource schema: ``{"collections": [{"name", "fields": [{"name", "type",
        ...}]}]}``. Fetched from the host on first use."""
        if self._schema is None:
            _wit.require("DataSource.schema")
            self._schema = json.loads(_wit.environment.schema())
        return self._schema if isinstance(self._schema, dict) else {}

    @property
    def options(self) -> dict[str, Any]:
        """The plugin's options (the ``[options]`` table of its ``.toml``, or those of the
        ``use`` that applied it); ``{}`` when none."""
        if self._options is None:
            _wit.require("DataSource.options")
            try:
                self._options = json.loads(_wit.environment.options())
            except ValueError:
                self._options = {}
        return self._options if isinstance(self._options, dict) else {}

    @property
    def scope(self) -> Optional[str]:
        """The collection this application of the plugin is scoped to, ``None`` when it is
        applied to the whole datasource."""
        if self._scope is ...:
            _wit.require("DataSource.scope")
            self._scope = _wit.environment.scope()
        return self._scope  # type: ignore[return-value]

    def set_environment(self, schema: JSON, options: JSON) -> None:
        """Sets the schema and options (what ``declare`` receives), instead of fetching them."""
        self._schema = schema
        self._options = options

    def collection_names(self) -> list[str]:
        """The names of the datasource's collections."""
        return [c["name"] for c in self.schema.get("collections", []) if "name" in c]

    def collection(self, name: str) -> CollectionCustomizer:
        """A customizer for one collection."""
        return CollectionCustomizer(self, name)

    def customize_collection(self, name: str,
                             f: Callable[[CollectionCustomizer], Any]) -> DataSource:
        """Runs ``f`` on the customizer of one collection (the spec's ``customizeCollection``)."""
        f(self.collection(name))
        return self

    def declare(self, collection: Optional[str], kind: str, name: str, definition: JSON,
                handler: Optional[Handler] = None) -> None:
        """Records one customization and its handler (low level: prefer the typed methods)."""
        self.declarations.append(
            Declaration(collection, kind, name, definition, len(self.handlers)))
        self.handlers.append(handler or Handler("none"))

    def add_chart(self, name: str, f: ChartFn) -> DataSource:
        """A datasource (dashboard) chart."""
        self.declare(None, "chart", name, {}, Handler("chart", f))
        return self

    def chart(self, name: str) -> Callable[[F], F]:
        """Decorator form of :meth:`add_chart`."""
        return _decorator(lambda f: self.add_chart(name, f))

    def remove_collection(self, name: str) -> DataSource:
        """Hides a collection from the exposed schema (with every relation pointing to it);
        customizations and handlers still use it."""
        self.declare(name, "remove-collection", "", {})
        return self

    def use_plugin(self, name: str, options: Optional[dict[str, JSON]] = None) -> DataSource:
        """Applies another plugin of the plugin directory (by its file stem) to the whole
        datasource with ``options``, right after this one."""
        self.declare(None, "use", name, {"options": options or {}})
        return self

    def add_workflow_step(self, name: str, f: StepFn) -> DataSource:
        """A workflow-step handler: a workflow's ``plugin`` step names it by this plugin's name
        and ``name``; ``f(step)`` decides (:meth:`StepOutput.choose`) or computes
        (:meth:`StepOutput.value`), or both. Names are unique within a plugin."""
        self.steps.append((name, len(self.handlers)))
        self.handlers.append(Handler("step", f))
        return self

    def workflow_step(self, name: str) -> Callable[[F], F]:
        """Decorator form of :meth:`add_workflow_step`."""
        return _decorator(lambda f: self.add_workflow_step(name, f))


def _decorator(register: Callable[[Any], Any]) -> Callable[[F], F]:
    def wrap(f: F) -> F:
        register(f)
        return f

    return wrap


class CollectionCustomizer:
    """Declares customizations on one collection; every method chains."""

    def __init__(self, datasource: DataSource, name: str) -> None:
        self.datasource = datasource
        self.name = name

    def _declare(self, kind: str, name: str, definition: JSON,
                 handler: Optional[Handler] = None) -> CollectionCustomizer:
        self.datasource.declare(self.name, kind, name, definition, handler)
        return self

    # ---- computed fields -------------------------------------------------------------------

    def add_field(self, name: str, field: ComputedField) -> CollectionCustomizer:
        """Adds a computed field."""
        return self._declare("field", name, field.definition(), Handler("field", field))

    def computed_field(self, name: str, column_type: ColumnTypeLike,
                       dependencies: Sequence[str], *, default_value: JSON = None,
                       enum_values: Optional[Sequence[str]] = None) -> Callable[[F], F]:
        """Decorator form of :meth:`add_field`: the decorated function is the batch function."""
        return _decorator(lambda f: self.add_field(name, ComputedField(
            column_type, dependencies, f, default_value, enum_values)))

    # ---- actions ---------------------------------------------------------------------------

    def add_action(self, name: str, action: Action) -> CollectionCustomizer:
        """Adds an action. A definition the toolkit refuses (pages mixed with other elements,
        a row holding a layout element) is logged and skipped, as in the Rust SDK."""
        try:
            definition = action.definition()
        except Exception as e:  # noqa: BLE001 - reported to the host's log
            if isinstance(self.datasource, Plugin):
                # Declared at import, that is at build time: fail the build, naming it.
                raise ValueError(f"action `{name}`: {e}") from e
            log(Level.ERROR, f"action `{name}` skipped: {e}")
            return self
        return self._declare("action", name, definition, Handler("action", action))

    def action(self, name: str, scope: Union[Scope, str], *, form: Sequence[FormElement] = (),
               description: Optional[str] = None, submit_button_label: Optional[str] = None,
               generate_file: bool = False) -> Callable[[F], F]:
        """Decorator form of :meth:`add_action`: the decorated function executes the action."""
        return _decorator(lambda f: self.add_action(name, Action(
            scope, f, form=form, description=description,
            submit_button_label=submit_button_label, generate_file=generate_file)))

    # ---- hooks, segments, search, charts ---------------------------------------------------

    def add_hook(self, position: Union[Position, str], operation: Union[Operation, str],
                 f: HookFn) -> CollectionCustomizer:
        """Adds a hook; hooks of one position and operation run in declaration order."""
        position, operation = Position(position), Operation(operation)
        return self._declare(
            "hook", f"{position.value} {operation.value}",
            {"position": position.value, "type": operation.value},
            Handler("hook", f, position, operation))

    def hook(self, position: Union[Position, str],
             operation: Union[Operation, str]) -> Callable[[F], F]:
        """Decorator form of :meth:`add_hook`."""
        return _decorator(lambda f: self.add_hook(position, operation, f))

    def add_segment(self, name: str, segment: Union[JSON, SegmentFn]) -> CollectionCustomizer:
        """Adds a segment: a condition tree (static), or a function of the context returning
        one on each request (dynamic)."""
        if callable(segment):
            return self._declare("segment", name, {}, Handler("segment", segment))
        return self._declare("segment", name, {"tree": segment})

    def segment(self, name: str) -> Callable[[F], F]:
        """Decorator form of a dynamic :meth:`add_segment`."""
        return _decorator(lambda f: self.add_segment(name, f))

    def replace_search(self, handler: Optional[SearchFn] = None, *,
                       only: Optional[Sequence[str]] = None, include: Sequence[str] = (),
                       exclude: Sequence[str] = ()) -> CollectionCustomizer:
        """Replaces the collection's search: by a field selection (``only``, ``include``,
        ``exclude``; relation paths with ``:``) or by ``handler(text, extended, ctx)``, which
        returns a condition tree (``None``: no condition)."""
        if handler is not None:
            return self._declare("search", "", {"handler": True}, Handler("search", handler))
        return self._declare("search", "", {
            "onlyFields": None if only is None else list(only),
            "includeFields": list(include),
            "excludeFields": list(exclude),
        })

    def search(self, f: F) -> F:
        """Decorator form of :meth:`replace_search` with a handler."""
        self.replace_search(f)
        return f

    def disable_search(self) -> CollectionCustomizer:
        """Turns search off on the collection (searching answers 400)."""
        return self._declare("disable-search", "", {})

    def add_chart(self, name: str, f: ChartFn) -> CollectionCustomizer:
        """Adds a record chart on the collection."""
        return self._declare("chart", name, {}, Handler("chart", f))

    def chart(self, name: str) -> Callable[[F], F]:
        """Decorator form of :meth:`add_chart`."""
        return _decorator(lambda f: self.add_chart(name, f))

    # ---- relations -------------------------------------------------------------------------

    def add_many_to_one_relation(self, name: str, foreign_collection: str, foreign_key: str, *,
                                 foreign_key_target: Optional[str] = None) -> CollectionCustomizer:
        """A many-to-one relation through ``foreign_key``, a column of this collection (pointing
        to ``foreign_key_target``, by default the foreign primary key)."""
        return self._declare("relation", name, {
            "type": "ManyToOne", "foreignCollection": foreign_collection,
            "foreignKey": foreign_key, "foreignKeyTarget": foreign_key_target})

    def add_one_to_many_relation(self, name: str, foreign_collection: str, origin_key: str, *,
                                 origin_key_target: Optional[str] = None) -> CollectionCustomizer:
        """A one-to-many relation: ``origin_key``, a column of the foreign collection, points to
        this collection (to ``origin_key_target``, by default its primary key)."""
        return self._declare("relation", name, {
            "type": "OneToMany", "foreignCollection": foreign_collection,
            "originKey": origin_key, "originKeyTarget": origin_key_target})

    def add_one_to_one_relation(self, name: str, foreign_collection: str, origin_key: str, *,
                                origin_key_target: Optional[str] = None) -> CollectionCustomizer:
        """A one-to-one relation: as :meth:`add_one_to_many_relation`, one record at most."""
        return self._declare("relation", name, {
            "type": "OneToOne", "foreignCollection": foreign_collection,
            "originKey": origin_key, "originKeyTarget": origin_key_target})

    def add_many_to_many_relation(self, name: str, foreign_collection: str,
                                  through_collection: str, origin_key: str, foreign_key: str, *,
                                  origin_key_target: Optional[str] = None,
                                  foreign_key_target: Optional[str] = None
                                  ) -> CollectionCustomizer:
        """A many-to-many relation through ``through_collection``, whose ``origin_key`` points to
        this collection and ``foreign_key`` to the foreign one."""
        return self._declare("relation", name, {
            "type": "ManyToMany", "foreignCollection": foreign_collection,
            "throughCollection": through_collection, "originKey": origin_key,
            "foreignKey": foreign_key, "originKeyTarget": origin_key_target,
            "foreignKeyTarget": foreign_key_target})

    def add_external_relation(self, name: str, schema: dict[str, JSON],
                              list_records: ListRecordsFn,
                              dependencies: Optional[Sequence[str]] = None
                              ) -> CollectionCustomizer:
        """Related data listed by the plugin (the agent's ``addExternalRelation``): a computed
        field of type ``[schema]`` whose value for each record is ``list_records(record, ctx)``.
        Its dependencies default to the collection's primary keys, read from the schema."""
        if dependencies is None and isinstance(self.datasource, Plugin):
            raise ValueError(f"external relation `{name}`: a Plugin declared at import cannot "
                             "read the schema: give its dependencies")
        deps = list(dependencies) if dependencies is not None else self._primary_keys()

        def compute(rows: Rows, ctx: Context) -> Column:
            return Column.json(list_records(r, ctx) for r in rows.records())

        return self.add_field(name, ComputedField([dict(schema)], deps, compute))

    def _primary_keys(self) -> list[str]:
        return [f["name"] for c in self.datasource.schema.get("collections", [])
                if c.get("name") == self.name for f in c.get("fields", [])
                if f.get("isPrimaryKey") is True and "name" in f]

    # ---- fields ----------------------------------------------------------------------------

    def import_field(self, name: str, path: str,
                     readonly: Optional[bool] = None) -> CollectionCustomizer:
        """Adds field ``name``, the column at the ``:`` path through to-one relations
        (``"customer:address:city"``); ``readonly=None`` follows the source field."""
        return self._declare("import-field", name, {"path": path, "readonly": readonly})

    def rename_field(self, current: str, new: str) -> CollectionCustomizer:
        """Exposes field ``current`` as ``new``; customizations keep using ``current``."""
        return self._declare("rename-field", current, {"newName": new})

    def remove_field(self, name: str) -> CollectionCustomizer:
        """Hides a field from the exposed schema; customizations and handlers still use it."""
        return self._declare("remove-field", name, {})

    def add_field_validation(self, field: str, operator: str,
                             value: JSON = None) -> CollectionCustomizer:
        """A validation rule on a writable column, checked on create and update (``Present``,
        ``LongerThan``, ``ShorterThan``, ``Contains``, ``Like``, ``Match``, ``GreaterThan``,
        ``LessThan``, ``Before``, ``After``)."""
        return self._declare("field-validation", field, {"operator": operator, "value": value})

    def set_field_nullable(self, field: str) -> CollectionCustomizer:
        """Marks a field optional (drops its ``Present`` rule)."""
        return self._declare("field-nullable", field, {})

    def replace_field_writing(self, field: str, f: WriteFn) -> CollectionCustomizer:
        """Replaces how ``field`` is written: ``f(value, ctx)`` returns the patch (a dict) that
        replaces ``{field: value}``, or ``None`` to write nothing for it. Also makes the field
        writable (e.g. a computed field)."""
        return self._declare("field-writing", field, {}, Handler("write", f))

    def field_writing(self, field: str) -> Callable[[F], F]:
        """Decorator form of :meth:`replace_field_writing`."""
        return _decorator(lambda f: self.replace_field_writing(field, f))

    def replace_field_binary_mode(self, field: str,
                                  mode: Union[BinaryMode, str]) -> CollectionCustomizer:
        """How a binary column crosses the wire: ``datauri`` or ``hex``."""
        return self._declare("binary-mode", field, {"mode": BinaryMode(mode).value})

    # ---- sorting and filtering -------------------------------------------------------------

    def emulate_field_sorting(self, field: str) -> CollectionCustomizer:
        """Sorts on ``field`` in memory (for fields the datasource cannot sort)."""
        return self._declare("sorting", field, {"mode": "emulate"})

    def replace_field_sorting(self, field: str,
                              equivalent: Iterable[tuple[str, bool]]) -> CollectionCustomizer:
        """Sorting on ``field`` sorts by ``equivalent`` (``[("last_name", True)]``) instead."""
        return self._declare("sorting", field, {
            "mode": "replace",
            "equivalentSort": [{"field": f, "ascending": a} for f, a in equivalent]})

    def disable_field_sorting(self, field: str) -> CollectionCustomizer:
        """Marks ``field`` not sortable."""
        return self._declare("sorting", field, {"mode": "disable"})

    def emulate_field_filtering(self, field: str) -> CollectionCustomizer:
        """Answers in memory every operator of ``field``'s type the datasource does not."""
        return self._declare("filtering", field, {"mode": "emulateAll"})

    def emulate_field_operator(self, field: str, operator: str) -> CollectionCustomizer:
        """Answers one operator of ``field`` in memory."""
        return self._declare("filtering", field, {"mode": "emulate", "operator": operator})

    def replace_field_operator(self, field: str, operator: str,
                               f: OperatorFn) -> CollectionCustomizer:
        """Rewrites the leaf ``field operator value`` into the condition tree ``f(value, ctx)``
        returns (in this collection's field names)."""
        return self._declare("filtering", field, {"mode": "replace", "operator": operator},
                             Handler("operator", f))

    def field_operator(self, field: str, operator: str) -> Callable[[F], F]:
        """Decorator form of :meth:`replace_field_operator`."""
        return _decorator(lambda f: self.replace_field_operator(field, operator, f))

    # ---- overrides, count, plugins ---------------------------------------------------------

    def override_create(self, f: CreateFn) -> CollectionCustomizer:
        """Replaces record creation: ``f(data, ctx)`` returns the created records, each with its
        primary key. Its ``ctx.collection(..)`` calls go below the override."""
        return self._declare("override", "create", {"operation": "create"},
                             Handler("create", f))

    def override_update(self, f: UpdateFn) -> CollectionCustomizer:
        """Replaces updates: ``f(filter, patch, ctx)`` updates the records matching ``filter``."""
        return self._declare("override", "update", {"operation": "update"},
                             Handler("update", f))

    def override_delete(self, f: DeleteFn) -> CollectionCustomizer:
        """Replaces deletes: ``f(filter, ctx)`` deletes the records matching ``filter``."""
        return self._declare("override", "delete", {"operation": "delete"},
                             Handler("delete", f))

    def override(self, operation: str) -> Callable[[F], F]:
        """Decorator form of the overrides: ``@orders.override("delete")``."""
        registers: dict[str, Callable[[Any], Any]] = {
            "create": self.override_create, "update": self.override_update,
            "delete": self.override_delete}
        register = registers.get(operation)
        if register is None:
            raise ValueError(f"no override for `{operation}` (create, update or delete)")
        return _decorator(register)

    def disable_count(self) -> CollectionCustomizer:
        """Removes the count from list pagination (the count route answers ``deactivated``)."""
        return self._declare("disable-count", "", {})

    def use_plugin(self, name: str,
                   options: Optional[dict[str, JSON]] = None) -> CollectionCustomizer:
        """Applies another plugin of the directory to this collection with ``options``."""
        return self._declare("use", name, {"options": options or {}})




class Plugin(DataSource):
    """A plugin declared at import, at the module's top level, instead of in a ``customize``
    function::

        plugin = Plugin()
        customers = plugin.collection("customers")

        @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
        def full_name(rows: Rows, ctx: Context) -> Texts: ...

        Customizer, Workflow = plugin.export()

    componentize-py runs the module at build time and snapshots the interpreter, so the handler
    table is in the component: a fresh instance (every action, hook, write, override and
    workflow step gets one) answers without running any ``customize`` first. The price: nothing
    may be read from the host while declaring — ``plugin.options``, ``plugin.schema`` and
    ``plugin.scope`` work only inside handlers (read there, they come from the host once per
    instance), and ``add_external_relation`` needs its ``dependencies``. Declarations cannot
    depend on options; behaviour can.
    """

    def __init__(self) -> None:
        super().__init__()

    def export(self) -> tuple[type[Any], type[Any]]:
        """Makes this the component's plugin; bind the result in the plugin's module:
        ``Customizer, Workflow = plugin.export()``."""
        from .exports import export_static

        return export_static(self)
