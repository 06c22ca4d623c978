"""``canopy_sdk``: write Canopy plugins in Python, built into a WebAssembly component with
componentize-py against ``canopy:plugin@0.3.0`` (:data:`WIT_VERSION`).

A plugin is one module whose ``customize(ds)`` declares everything, exported with
:func:`export_plugin`::

    from canopy_sdk import ColumnType, DataSource, Rows, Context, export_plugin

    def customize(ds: DataSource) -> None:
        customers = ds.collection("customers")

        @customers.computed_field("full_name", ColumnType.STRING, ["first_name", "last_name"])
        def full_name(rows: Rows, ctx: Context) -> list[str]:
            return [f"{f or ''} {l or ''}"
                    for f, l in zip(rows.text("first_name"), rows.text("last_name"))]

        customers.add_segment("VIP", {"field": "is_vip", "operator": "Equal", "value": True})

    # componentize-py looks the export classes up by name in this module.
    Customizer, Workflow = export_plugin(customize)

The concepts are the Rust SDK's (``guest-sdk/README.md``), with Python's idioms: keyword
arguments instead of builders, decorators for the kinds that take a function, exceptions
(:class:`ValidationError` ...) instead of ``Err``.
"""

from .actions import (
    Action,
    ActionContext,
    ActionResult,
    Field,
    FieldType,
    FormElement,
    HtmlBlock,
    Page,
    Row,
    Scope,
    Separator,
)
from .charts import ChartContext, ChartResult, TimeRange
from .customize import CollectionCustomizer, ColumnType, ComputedField, DataSource, Plugin
from .data import (
    JSON,
    Caller,
    CollectionRef,
    Column,
    ColumnKind,
    Context,
    Level,
    Rows,
    Texts,
    as_number,
    as_text,
    js_number,
    log,
)
from .errors import (
    CanopyError,
    ForbiddenError,
    InternalError,
    NotFoundError,
    UnprocessableError,
    ValidationError,
)
from .exports import Customizer, Workflow, export_plugin
from .hooks import HookContext, Operation, Position
from .workflow import StepContext, StepOutput
from .write import BinaryMode, WriteAction, WriteContext

#: The version of the WIT package this SDK builds against; the host checks it at load.
WIT_VERSION = "0.3.0"

__version__ = "0.1.0"

__all__ = [
    "JSON", "WIT_VERSION", "Action", "ActionContext", "ActionResult", "BinaryMode", "Caller",
    "CanopyError", "ChartContext", "ChartResult", "CollectionCustomizer", "CollectionRef",
    "Column", "ColumnKind", "ColumnType", "ComputedField", "Context", "Customizer", "DataSource",
    "Field", "FieldType", "ForbiddenError", "FormElement", "HookContext", "HtmlBlock",
    "InternalError", "Level", "NotFoundError", "Operation", "Page", "Plugin", "Position", "Row", "Rows",
    "Scope", "Separator", "StepContext", "StepOutput", "Texts", "TimeRange",
    "UnprocessableError", "ValidationError", "Workflow", "WriteAction", "WriteContext",
    "as_number", "as_text", "export_plugin", "js_number", "log",
]
