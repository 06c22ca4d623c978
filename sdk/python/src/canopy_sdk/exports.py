"""The component's exports: the ``Customizer`` and ``Workflow`` classes componentize-py looks up
in the plugin's module, dispatching the host's calls to the handlers ``customize`` declared.

The handler table is built once per instance, on its first call, by running ``customize``, and
kept for the calls that follow: the host reuses warm instances for pure calls (computed fields,
search, segments, charts, operator replacements) and gives the others a fresh instance.

Every exception a handler raises is answered, never let through: a :class:`CanopyError` as its
WIT error case, anything else as ``internal`` with the exception's type, message and place. An
exception escaping an export would make componentize-py print a traceback to stderr and trap,
and the host drops a warm instance that wrote to stderr. For the same reason ``print`` and
``sys.stderr`` are sent to the host's log (stdout at info, stderr at warn) from the first call on.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from typing import Any, Optional

from . import _wit
from .actions import Action, ActionContext, ActionResult
from .charts import ChartContext, ChartResult
from .customize import DataSource, Handler
from .data import Context, Level, Rows, dumps, log
from .errors import CanopyError, InternalError
from .hooks import HookContext
from .workflow import StepContext, StepOutput
from .write import WriteContext

CustomizeFn = Callable[[DataSource], Any]

_customize: Optional[CustomizeFn] = None
_table: Optional[DataSource] = None
#: A plugin declared at import (:class:`~canopy_sdk.Plugin`): its table is in the build-time
#: snapshot, and no instance runs a ``customize``.
_static: Optional[DataSource] = None
_streams_installed = False


class _LogStream:
    """A text stream writing each complete line to the host's log at one level."""

    def __init__(self, level: Level) -> None:
        self.level = level
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            log(self.level, line)
        return len(text)

    def flush(self) -> None:
        if self.pending:
            log(self.level, self.pending)
            self.pending = ""

    def isatty(self) -> bool:
        return False


def _install_streams() -> None:
    """Sends ``print`` and ``sys.stderr`` to the host's log. Done on the first call, not at
    import: componentize-py imports the plugin at build time, when there is no host to call."""
    global _streams_installed
    if not _streams_installed:
        sys.stdout = _LogStream(Level.INFO)  # type: ignore[assignment,unused-ignore]
        sys.stderr = _LogStream(Level.WARN)  # type: ignore[assignment,unused-ignore]
        _streams_installed = True


def describe(e: BaseException) -> str:
    """An unexpected exception as a one-line message naming where it was raised."""
    frames = traceback.extract_tb(e.__traceback__)
    place = ""
    if frames:
        last = frames[-1]
        place = f" (at {last.filename}:{last.lineno}, in {last.name})"
    return f"{type(e).__name__}: {e}{place}"


def _guard(method: Callable[..., Any]) -> Callable[..., Any]:
    """Runs an export, answering every exception as the WIT error it stands for."""

    def call(self: Any, *args: Any) -> Any:
        _install_streams()
        try:
            return method(self, *args)
        except CanopyError as e:
            raise _wit.Err(e.to_wit()) from None
        except BaseException as e:  # noqa: BLE001 - a bug in the plugin: a 500 naming it
            raise _wit.Err(_wit.types.Error_Internal(describe(e))) from None

    call.__name__ = method.__name__
    call.__doc__ = method.__doc__
    return call


def _build(ds: DataSource) -> DataSource:
    if _static is not None:
        return _static
    if _customize is None:
        raise InternalError("no plugin exported: call canopy_sdk.export_plugin(customize)")
    _customize(ds)
    return ds


def _handler(handler: int, kinds: tuple[str, ...]) -> Handler:
    """Handler ``handler`` of this instance's table (built first if there is none)."""
    global _table
    if _table is None:
        _table = _build(DataSource())
    try:
        h = _table.handlers[handler]
    except IndexError:
        raise InternalError(f"no handler {handler}") from None
    if h.kind not in kinds:
        raise InternalError(f"handler {handler} is not of the called kind")
    return h


def _object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


class Customizer:
    """The ``canopy:plugin/customizer`` export."""

    @_guard
    def declare(self, schema_json: str, options_json: str) -> list[Any]:
        global _table
        ds = _build(DataSource(json.loads(schema_json), json.loads(options_json)))
        if ds is _static:
            # This instance's copy of the snapshot learns the schema and options now.
            ds.set_environment(json.loads(schema_json), json.loads(options_json))
        _table = ds
        kind = _wit.types.Kind
        return [
            _wit.types.Customization(d.collection, kind[d.kind.upper().replace("-", "_")],
                                     d.name, dumps(d.definition), d.handler)
            for d in ds.declarations
        ]

    @_guard
    def compute(self, handler: int, ctx: Any, rows: Any) -> Any:
        field = _handler(handler, ("field",)).fn
        batch = Rows.from_wit(rows)
        column = field.to_column(field.compute(batch, Context.from_wit(ctx)))
        if len(column) != len(batch):
            raise InternalError(
                f"computed field returned {len(column)} values for {len(batch)} rows")
        return column.to_packed()

    @_guard
    def action_form(self, handler: int, ctx: Any, action_json: str) -> str:
        action: Action = _handler(handler, ("action",)).fn
        return dumps(action.evaluate_form(ActionContext(Context.from_wit(ctx),
                                                        _object(action_json))))

    @_guard
    def action_execute(self, handler: int, ctx: Any, action_json: str) -> Any:
        action: Action = _handler(handler, ("action",)).fn
        result = action.execute(ActionContext(Context.from_wit(ctx), _object(action_json)))
        if not isinstance(result, ActionResult):
            raise InternalError(f"an action returned {type(result).__name__}, not ActionResult")
        return _wit.types.ActionOutcome(dumps(result.to_json()), result.file_bytes)

    @_guard
    def hook(self, handler: int, ctx: Any, hook_json: str) -> Optional[str]:
        h = _handler(handler, ("hook",))
        assert h.position is not None and h.operation is not None
        hc = HookContext(Context.from_wit(ctx), h.position, h.operation, _object(hook_json))
        h.fn(hc)
        change = hc.change()
        return None if change is None else dumps(change)

    @_guard
    def segment(self, handler: int, ctx: Any) -> str:
        return dumps(_handler(handler, ("segment",)).fn(Context.from_wit(ctx)))

    @_guard
    def search(self, handler: int, ctx: Any, search: str, extended: bool) -> Optional[str]:
        tree = _handler(handler, ("search",)).fn(search, extended, Context.from_wit(ctx))
        return None if tree is None else dumps(tree)

    @_guard
    def chart(self, handler: int, ctx: Any, chart_json: str) -> str:
        f = _handler(handler, ("chart",)).fn
        result = f(ChartContext(Context.from_wit(ctx), _object(chart_json)))
        return dumps(result.to_json() if isinstance(result, ChartResult) else result)

    @_guard
    def write(self, handler: int, ctx: Any, write_json: str) -> Optional[str]:
        f = _handler(handler, ("write",)).fn
        payload = _object(write_json)
        patch = f(payload.get("value"), WriteContext(Context.from_wit(ctx), payload))
        if patch is None:
            return None
        if not isinstance(patch, dict):
            raise InternalError(f"a write replacement returned {dumps(patch)}, not an object")
        return dumps(patch)

    @_guard
    def replace_operator(self, handler: int, ctx: Any, value_json: str) -> str:
        f = _handler(handler, ("operator",)).fn
        return dumps(f(json.loads(value_json), Context.from_wit(ctx)))

    @_guard
    def override_operation(self, handler: int, ctx: Any, override_json: str) -> Optional[str]:
        h = _handler(handler, ("create", "update", "delete"))
        payload = _object(override_json)
        context = Context.from_wit(ctx)
        if h.kind == "create":
            data = payload.get("data")
            return dumps(list(h.fn(data if isinstance(data, list) else [], context)))
        if h.kind == "update":
            h.fn(payload.get("filter"), payload.get("patch"), context)
        else:
            h.fn(payload.get("filter"), context)
        return None


class Workflow:
    """The ``canopy:plugin/workflow`` export."""

    @_guard
    def declare_steps(self) -> list[Any]:
        global _table
        if _table is None:
            _table = _build(DataSource())
        return [_wit.workflow.StepDeclaration(name, handler) for name, handler in _table.steps]

    @_guard
    def workflow_step(self, handler: int, ctx: Any, input: Any) -> Any:
        f = _handler(handler, ("step",)).fn
        step = StepContext(Context.from_wit(ctx), input.record_id, json.loads(input.context_json),
                           json.loads(input.settings_json))
        output = f(step)
        if output is None:
            output = StepOutput.next()
        return _wit.workflow.StepOutput(output.option, dumps(output.values))


def export_plugin(customize: CustomizeFn) -> tuple[type[Customizer], type[Workflow]]:
    """Makes ``customize`` the plugin and returns the export classes. componentize-py looks them
    up by name in the plugin's module, so bind them there::

        Customizer, Workflow = canopy_sdk.export_plugin(customize)
    """
    global _customize, _table, _static
    _customize = customize
    _table = _static = None
    return Customizer, Workflow


def export_static(plugin: DataSource) -> tuple[type[Customizer], type[Workflow]]:
    """Makes ``plugin``, whose declarations were made at import, the plugin (what
    :meth:`canopy_sdk.Plugin.export` calls)."""
    global _customize, _table, _static
    _customize = None
    _table = _static = plugin
    return Customizer, Workflow
