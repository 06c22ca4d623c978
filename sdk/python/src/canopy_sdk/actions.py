"""Actions: :class:`Action` (scope, form, execute), form elements (:class:`Field` and the layout
elements :class:`Separator`, :class:`HtmlBlock`, :class:`Row`, :class:`Page`) with static or
dynamic properties, the :class:`ActionContext` handlers receive and the :class:`ActionResult`
they return.

A property given as a function (``value``, ``enum_values``, ``options``, ``visible_if``, an
``HtmlBlock``'s content) makes the form dynamic: the SDK evaluates it on the form's load, change
and search hooks. Every form value a function reads (:meth:`ActionContext.form_value`) makes the
front end send change hooks for that field (``watchChanges``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Optional, Union

from .data import JSON, Caller, CollectionRef, Context, Rows
from .errors import NotFoundError, ValidationError


class Scope(str, enum.Enum):
    """Which records an action targets."""

    SINGLE = "Single"
    """Exactly one record."""
    BULK = "Bulk"
    """One or more records."""
    GLOBAL = "Global"
    """The whole collection (no selection)."""


class FieldType(str, enum.Enum):
    """The type of a form field (the spec's list)."""

    STRING = "String"
    NUMBER = "Number"
    BOOLEAN = "Boolean"
    DATE = "Date"
    DATEONLY = "Dateonly"
    TIME = "Time"
    ENUM = "Enum"
    ENUM_LIST = "EnumList"
    FILE = "File"
    FILE_LIST = "FileList"
    JSON = "Json"
    COLLECTION = "Collection"
    NUMBER_LIST = "NumberList"
    STRING_LIST = "StringList"


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""Marks a property that was not given (``None`` is a real JSON null)."""

ContextFn = Callable[["ActionContext"], Any]
OptionsFn = Callable[["ActionContext", Optional[str]], Iterable[tuple[str, JSON]]]


class FormElement:
    """Base of every form element."""

    visible_if: Optional[Callable[[ActionContext], bool]] = None

    def is_dynamic(self) -> bool:
        """Whether evaluating the element needs the context."""
        raise NotImplementedError

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        """The element in the agent's shape; ``ctx`` evaluates dynamic properties (``None``:
        the static shape, declared at load)."""
        raise NotImplementedError

    def children(self) -> Sequence[FormElement]:
        """The elements a row or a page holds."""
        return ()


class Field(FormElement):
    """A form field. ``label`` is also its id unless ``id`` is given; form values are keyed by
    the id. ``value``, ``enum_values``, ``options`` and ``visible_if`` may be functions of the
    :class:`ActionContext` (``options(ctx, search_text)``); ``properties`` holds any other
    property of the agent's form element (widget settings such as ``min``, ``max``, ``step``).
    """

    def __init__(
        self,
        label: str,
        type: Union[FieldType, str],
        *,
        id: Optional[str] = None,
        required: bool = False,
        read_only: bool = False,
        description: Optional[str] = None,
        default_value: JSON = UNSET,
        value: Optional[ContextFn] = None,
        enum_values: Union[Sequence[str], ContextFn, None] = None,
        collection_name: Optional[str] = None,
        widget: Optional[str] = None,
        options: Union[Sequence[tuple[str, JSON]], OptionsFn, None] = None,
        placeholder: Optional[str] = None,
        search: Optional[str] = None,
        visible_if: Optional[Callable[[ActionContext], bool]] = None,
        properties: Optional[dict[str, JSON]] = None,
    ) -> None:
        self.label = label
        self.id = id if id is not None else label
        self.type = FieldType(type)
        self.required = required
        self.read_only = read_only
        self.description = description
        self.default_value = default_value
        self.value = value
        self.enum_values = enum_values
        self.collection_name = collection_name
        self.widget = widget
        self.options = options
        self.placeholder = placeholder
        # Options computed from the search text make the dropdown's search dynamic.
        self.search = search if search is not None or not callable(options) else "dynamic"
        self.visible_if = visible_if
        self.properties = dict(properties or {})

    def is_dynamic(self) -> bool:
        return (self.value is not None or self.visible_if is not None
                or callable(self.enum_values) or callable(self.options))

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        o: dict[str, JSON] = {
            "id": self.id,
            "label": self.label,
            "type": self.type.value,
            "isRequired": self.required,
            "isReadOnly": self.read_only,
        }
        if self.description is not None:
            o["description"] = self.description
        if self.default_value is not UNSET:
            o["defaultValue"] = self.default_value
        if self.collection_name is not None:
            o["collectionName"] = self.collection_name
        if self.widget is not None:
            o["widget"] = self.widget
        if self.placeholder is not None:
            o["placeholder"] = self.placeholder
        if self.search is not None:
            o["search"] = self.search
        if callable(self.enum_values):
            if ctx is not None:
                o["enumValues"] = list(self.enum_values(ctx))
        elif self.enum_values is not None:
            o["enumValues"] = list(self.enum_values)
        if callable(self.options):
            if ctx is not None:
                o["options"] = _options_json(self.options(ctx, search_value))
        elif self.options is not None:
            o["options"] = _options_json(self.options)
        if ctx is not None:
            if self.value is not None:
                o["value"] = self.value(ctx)
            elif self.id in ctx.raw_form_values:
                o["value"] = ctx.raw_form_values[self.id]
            elif self.default_value is not UNSET:
                o["value"] = self.default_value
        o.update(self.properties)
        return o


class Separator(FormElement):
    """A horizontal line between elements."""

    def __init__(self, *, visible_if: Optional[Callable[[ActionContext], bool]] = None) -> None:
        self.visible_if = visible_if

    def is_dynamic(self) -> bool:
        return self.visible_if is not None

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        return {"type": "Layout", "component": "Separator"}


class HtmlBlock(FormElement):
    """A block of HTML; ``content`` may be a function of the context (the spec's ``content``
    function), re-evaluated on every form hook."""

    def __init__(self, content: Union[str, Callable[[ActionContext], str]], *,
                 visible_if: Optional[Callable[[ActionContext], bool]] = None) -> None:
        self.content = content
        self.visible_if = visible_if

    def is_dynamic(self) -> bool:
        return callable(self.content) or self.visible_if is not None

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        o: dict[str, JSON] = {"type": "Layout", "component": "HtmlBlock"}
        if callable(self.content):
            if ctx is not None:
                o["content"] = self.content(ctx)
        else:
            o["content"] = self.content
        return o


class Row(FormElement):
    """Fields shown side by side (the front end shows two per row). Only fields belong in a row."""

    def __init__(self, fields: Sequence[FormElement], *,
                 visible_if: Optional[Callable[[ActionContext], bool]] = None) -> None:
        self.fields = list(fields)
        self.visible_if = visible_if

    def children(self) -> Sequence[FormElement]:
        return self.fields

    def is_dynamic(self) -> bool:
        return self.visible_if is not None or any(f.is_dynamic() for f in self.fields)

    def layout_json(self, children: list[JSON]) -> JSON:
        return {"type": "Layout", "component": "Row", "fields": children}

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        return self.layout_json([f.to_json(ctx, search_value) for f in self.fields])


class Page(FormElement):
    """One page of a multi-page form. A form made of pages holds nothing else at its top level."""

    def __init__(self, elements: Sequence[FormElement], *,
                 next_button_label: Optional[str] = None,
                 previous_button_label: Optional[str] = None,
                 visible_if: Optional[Callable[[ActionContext], bool]] = None) -> None:
        self.elements = list(elements)
        self.next_button_label = next_button_label
        self.previous_button_label = previous_button_label
        self.visible_if = visible_if

    def children(self) -> Sequence[FormElement]:
        return self.elements

    def is_dynamic(self) -> bool:
        return self.visible_if is not None or any(e.is_dynamic() for e in self.elements)

    def layout_json(self, children: list[JSON]) -> JSON:
        o: dict[str, JSON] = {"type": "Layout", "component": "Page"}
        if self.next_button_label is not None:
            o["nextButtonLabel"] = self.next_button_label
        if self.previous_button_label is not None:
            o["previousButtonLabel"] = self.previous_button_label
        o["elements"] = children
        return o

    def to_json(self, ctx: Optional[ActionContext], search_value: Optional[str] = None) -> JSON:
        return self.layout_json([e.to_json(ctx, search_value) for e in self.elements])


def _options_json(options: Iterable[tuple[str, JSON]]) -> list[JSON]:
    return [{"label": label, "value": value} for label, value in options]


def _rows(element: FormElement) -> list[FormElement]:
    """The element and every row below it (rows sit at the top level or in pages)."""
    if isinstance(element, Row):
        return [element]
    if isinstance(element, Page):
        return [r for e in element.elements for r in _rows(e)]
    return []


def _find_field(elements: Sequence[FormElement], wanted: str) -> Optional[Field]:
    """The field with this id (or label), inside rows and pages too."""
    for e in elements:
        if isinstance(e, Field):
            if wanted in (e.id, e.label):
                return e
        else:
            found = _find_field(e.children(), wanted)
            if found is not None:
                return found
    return None


def _visible(element: FormElement, ctx: ActionContext) -> bool:
    """Whether the element's ``visible_if`` lets it show; at execute every field stays so that
    its value is read."""
    if element.visible_if is not None and ctx.hook != "execute":
        return bool(element.visible_if(ctx))
    return True


def _evaluate(elements: Sequence[FormElement], ctx: ActionContext) -> list[JSON]:
    """The elements shown for this context: hidden ones dropped, and a row or a page left
    without elements dropped too (the toolkit's ``dropIfs``)."""
    out: list[JSON] = []
    for element in elements:
        if not _visible(element, ctx):
            continue
        if isinstance(element, (Row, Page)):
            children = _evaluate(element.children(), ctx)
            if not children and ctx.hook != "execute":
                continue
            out.append(element.layout_json(children))
        else:
            out.append(element.to_json(ctx))
    return out


def _mark_watched(v: JSON, reads: set[str]) -> None:
    """Sets ``watchChanges`` on every field of an evaluated element (inside rows and pages)."""
    if not isinstance(v, dict):
        return
    if v.get("type") == "Layout":
        for key in ("fields", "elements"):
            for child in v.get(key) or ():
                _mark_watched(child, reads)
        return
    v["watchChanges"] = v.get("id") in reads


ExecuteFn = Callable[["ActionContext"], "ActionResult"]


class Action:
    """An action: its scope, its execute handler, an optional form and presentation options.

    >>> Action(Scope.SINGLE, lambda ctx: ActionResult.success("Done"),
    ...        form=[Field("Amount", FieldType.NUMBER, required=True)])  # doctest: +ELLIPSIS
    <canopy_sdk.actions.Action object at ...>
    """

    def __init__(
        self,
        scope: Union[Scope, str],
        execute: ExecuteFn,
        *,
        form: Sequence[FormElement] = (),
        description: Optional[str] = None,
        submit_button_label: Optional[str] = None,
        generate_file: bool = False,
    ) -> None:
        self.scope = Scope(scope)
        self.execute = execute
        self.form = list(form)
        self.description = description
        self.submit_button_label = submit_button_label
        self.generate_file = generate_file

    def definition(self) -> JSON:
        """The static definition declared at load (raises :class:`ValidationError` on a form
        the toolkit refuses)."""
        pages = sum(1 for e in self.form if isinstance(e, Page))
        if 0 < pages < len(self.form):
            raise ValidationError("You cannot mix pages and other form elements in an action form")
        for row in (r for e in self.form for r in _rows(e)):
            if any(not isinstance(c, Field) for c in row.children()):
                raise ValidationError("A row of an action form holds fields only")
        return {
            "scope": self.scope.value,
            "description": self.description,
            "submitButtonLabel": self.submit_button_label,
            "generateFile": self.generate_file,
            "form": [e.to_json(None) for e in self.form],
            "dynamicForm": any(e.is_dynamic() for e in self.form),
        }

    def evaluate_form(self, ctx: ActionContext) -> list[JSON]:
        """The evaluated form: ``visible_if`` applied, dynamic properties computed, values filled
        in. On the search hook only the searched field is rebuilt (and returned, out of its row
        or page, as the agent does)."""
        if ctx.search_field is not None:
            element = _find_field(self.form, ctx.search_field)
            out = ([element.to_json(ctx, ctx.search_value)]
                   if element is not None and _visible(element, ctx) else [])
        else:
            out = _evaluate(self.form, ctx)
        for v in out:
            _mark_watched(v, ctx.reads)
        return out


#: The toolkit's error when a Single action's selection matches no record.
NO_RECORD = "Query with filter did not match any records"


class ActionContext:
    """What an action's execute handler and its form's functions receive."""

    def __init__(self, context: Context, payload: dict[str, Any]) -> None:
        def text(key: str) -> Optional[str]:
            v = payload.get(key)
            return v if isinstance(v, str) else None

        values = payload.get("formValues")
        self.context = context
        self.raw_form_values: dict[str, JSON] = values if isinstance(values, dict) else {}
        #: The selection as a condition tree (``None`` for a global action).
        self.filter: JSON = payload.get("filter")
        keys = payload.get("primaryKeys")
        self.primary_keys: list[str] = [k for k in keys if isinstance(k, str)] if isinstance(
            keys, list) else []
        self.changed_field = text("changedField")
        self.search_field = text("searchField")
        self.search_value = text("searchValue")
        #: ``load``, ``change``, ``search`` or ``execute``.
        self.hook = text("hook")
        #: Form fields read by the handlers (they are watched for changes).
        self.reads: set[str] = set()

    @property
    def caller(self) -> Caller:
        """The request's caller."""
        return self.context.caller

    def collection(self) -> CollectionRef:
        """The action's collection."""
        return self.context.this()

    def form_value(self, id: str) -> JSON:
        """One form value by field id (``None`` when unset). Reading it makes the form watch the
        field."""
        self.reads.add(id)
        return self.raw_form_values.get(id)

    @property
    def form_values(self) -> dict[str, JSON]:
        """Every form value by field id (marks them all as watched)."""
        self.reads.update(self.raw_form_values)
        return self.raw_form_values

    def has_field_changed(self, id: str) -> bool:
        """Whether the change hook was triggered by this field."""
        self.reads.add(id)
        return self.changed_field == id

    def get_records(self, fields: Sequence[str]) -> Rows:
        """The selected records with these fields (one ``list`` call)."""
        return self.collection().list(self.filter, fields)

    def get_composite_record_ids(self) -> list[list[JSON]]:
        """Every primary key value of each selected record."""
        keys = self.primary_keys
        rows = self.get_records(keys)
        return [[rows.value(i, k) for k in keys] for i in range(len(rows))]

    def get_record_ids(self) -> list[JSON]:
        """The primary key values of the selected records (the first key of composite keys)."""
        return [ids[0] for ids in self.get_composite_record_ids() if ids]

    def get_record(self, fields: Sequence[str]) -> dict[str, JSON]:
        """The single selected record (Single scope) with these fields."""
        rows = self.get_records(fields)
        if not len(rows):
            raise NotFoundError(NO_RECORD)
        return rows.record(0)

    def get_record_id(self) -> JSON:
        """The single selected record's id (Single scope)."""
        ids = self.get_record_ids()
        if not ids:
            raise NotFoundError(NO_RECORD)
        return ids[0]

    def get_composite_record_id(self) -> list[JSON]:
        """The single selected record's composite id (Single scope)."""
        ids = self.get_composite_record_ids()
        if not ids:
            raise NotFoundError(NO_RECORD)
        return ids[0]

    def get_field(self, path: str) -> JSON:
        """One field (or relation path) of the single selected record."""
        return self.get_record([path]).get(path)


class ActionResult:
    """What an action's execute returns (the spec's result builder): build one with
    :meth:`success`, :meth:`error`, :meth:`webhook`, :meth:`file` or :meth:`redirect_to`, then
    add response headers with :meth:`header`."""

    def __init__(self, result: dict[str, JSON], file_bytes: Optional[bytes] = None) -> None:
        self.result = result
        #: The bytes of a :meth:`file` result (``None`` for the others).
        self.file_bytes = file_bytes
        self.headers: dict[str, str] = {}

    @classmethod
    def success(cls, message: str, *, html: Optional[str] = None,
                invalidated: Iterable[str] = ()) -> ActionResult:
        """200 ``{"success": message}``; ``invalidated``: relations or collections the front end
        refreshes."""
        return cls({"type": "Success", "message": message, "html": html,
                    "invalidated": list(invalidated)})

    @classmethod
    def error(cls, message: str, *, html: Optional[str] = None) -> ActionResult:
        """400 ``{"error": message}``: a refusal the person sees (not a failure of the plugin)."""
        return cls({"type": "Error", "message": message, "html": html})

    @classmethod
    def webhook(cls, url: str, method: str = "POST", headers: Optional[dict[str, JSON]] = None,
                body: JSON = None) -> ActionResult:
        """200 ``{"webhook": {url, method, headers, body}}``: the front end makes the call."""
        return cls({"type": "Webhook", "url": url, "method": method, "headers": headers or {},
                    "body": body})

    @classmethod
    def file(cls, data: Union[bytes, str], name: str, mime_type: str) -> ActionResult:
        """A file download (the action must be declared with ``generate_file=True``)."""
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return cls({"type": "File", "name": name, "mimeType": mime_type}, data)

    @classmethod
    def redirect_to(cls, path: str) -> ActionResult:
        """200 ``{"redirectTo": path}``."""
        return cls({"type": "Redirect", "path": path})

    def header(self, name: str, value: str) -> ActionResult:
        """Adds a response header (the spec's ``setHeader``); returns the result."""
        self.headers[name] = value
        return self

    def to_json(self) -> dict[str, JSON]:
        """The result as the host reads it."""
        return {**self.result, "responseHeaders": dict(self.headers)}
