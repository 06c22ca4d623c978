"""Data crossing the boundary: packed :class:`Texts`, typed :class:`Column` s, columnar
:class:`Rows`, the :class:`Caller`, the handler :class:`Context` and :class:`CollectionRef` for
reading and writing through the host.

Values are plain JSON-shaped Python values (``dict``, ``list``, ``str``, ``int``, ``float``,
``bool``, ``None``). Numbers cross the boundary as 64-bit floats; an integral one is handed out
as an ``int`` (``42``, not ``42.0``) so that an id given back in a filter or a write is the
integer it was. Values the agent serves as text (PostgreSQL/MySQL bigints and decimals, binary
keys as hex, other bytes as data URIs) cross as that text, exactly: give them back as they are.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate
from dataclasses import dataclass
from typing import Any, List, Optional, Union

from . import _wit
from .errors import CanopyError, InternalError, from_wit

JSON = Any
"""A JSON value: ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``."""

_EXACT = 9_007_199_254_740_992.0  # 2**53: integral floats below it are exact integers


def dumps(value: JSON) -> str:
    """Compact JSON text (what crosses the boundary)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_number(n: float) -> Union[int, float]:
    """A number cell as JSON: an integral value below 2**53 as an ``int``, others as ``float``."""
    if n == n and abs(n) < _EXACT and n == int(n):
        return int(n)
    return n


def js_number(n: float) -> str:
    """A number as JavaScript's ``String(n)`` writes the values ids hold (``5``, not ``5.0``)."""
    return str(json_number(n))


def as_number(value: JSON) -> Optional[float]:
    """The value as a float when it is a JSON number (``None`` for text, booleans and null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def as_text(value: JSON) -> Optional[str]:
    """The value when it is a JSON string, else ``None``."""
    return value if isinstance(value, str) else None


# --------------------------------------------------------------------------------------------
# Packed text cells
# --------------------------------------------------------------------------------------------


class Texts(Sequence[Optional[str]]):
    """Text cells packed as ``canopy:plugin@0.3.0``'s ``packed.texts``: all the cells' UTF-8 in
    one ``text``, the byte offset where each cell ends in ``ends`` and the null rows in ``nulls``.

    A computed field's text dependencies arrive in this form, and a text answer goes back in it
    (three allocations on each side whatever the number of rows, instead of one per cell). Read
    it as a sequence of ``Optional[str]`` (``texts[i]``, ``for cell in texts``); it is unpacked
    into Python strings once, on first read. Build one with :meth:`Texts.of` or return a list of
    ``Optional[str]`` from a computed field: the SDK packs it.
    """

    __slots__ = ("text", "ends", "nulls", "_cells")

    def __init__(self, text: str = "", ends: Optional[list[int]] = None,
                 nulls: Optional[list[int]] = None) -> None:
        self.text = text
        self.ends: list[int] = ends if ends is not None else []
        self.nulls: list[int] = nulls if nulls is not None else []
        self._cells: Optional[list[Optional[str]]] = None

    @classmethod
    def of(cls, cells: Iterable[Optional[str]]) -> Texts:
        """Packs cells (``None``: a null cell)."""
        cells = cells if isinstance(cells, list) else list(cells)
        if None not in cells:
            # The common case, in C loops: no null, and ASCII text (byte offsets are lengths).
            text = "".join(cells)  # type: ignore[arg-type,unused-ignore]
            if text.isascii():
                return cls(text, list(accumulate(map(len, cells))), [])  # type: ignore[arg-type,unused-ignore]
        parts: list[str] = []
        ends: list[int] = []
        nulls: list[int] = []
        position = 0
        for row, cell in enumerate(cells):
            if cell is None:
                nulls.append(row)
            else:
                parts.append(cell)
                # str.isascii() is O(1) in CPython: only non-ASCII cells pay an encode.
                position += len(cell) if cell.isascii() else len(cell.encode("utf-8"))
            ends.append(position)
        return cls("".join(parts), ends, nulls)

    def cells(self) -> list[Optional[str]]:
        """The cells as a list of ``Optional[str]`` (unpacked once, then kept)."""
        if self._cells is None:
            self._cells = self._unpack()
        return self._cells

    def _unpack(self) -> list[Optional[str]]:
        ends = self.ends
        starts = [0]
        starts.extend(ends[:-1])
        out: list[Optional[str]]
        if self.text.isascii():
            # Byte offsets are character offsets: slice the str itself (a comprehension over
            # zip measured faster than map(slice, ...)).
            text = self.text
            out = [text[s:e] for s, e in zip(starts, ends)]
        else:
            data = self.text.encode("utf-8")
            out = []
            for s, e in zip(starts, ends):
                try:
                    out.append(data[s:e].decode("utf-8"))
                except UnicodeDecodeError:
                    out.append(None)  # an offset that splits a character reads as null
        for row in self.nulls:
            if 0 <= row < len(out):
                out[row] = None
        return out

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, row: Any) -> Any:
        return self.cells()[row]

    def __iter__(self) -> Iterator[Optional[str]]:
        return iter(self.cells())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Texts):
            return self.cells() == other.cells()
        if isinstance(other, list):
            return self.cells() == other
        return NotImplemented

    def __repr__(self) -> str:
        return f"Texts({self.cells()!r})"

    def to_wit(self) -> Any:
        """The WIT ``packed.texts`` record."""
        return _wit.packed.Texts(self.text, self.ends, self.nulls)


# --------------------------------------------------------------------------------------------
# Columns and rows
# --------------------------------------------------------------------------------------------


class ColumnKind(str, enum.Enum):
    """The four cases of a column."""

    NUMBERS = "numbers"
    STRINGS = "strings"
    BOOLEANS = "booleans"
    JSON = "json"


class Column:
    """One column of values, one cell per row (``None`` is null): numbers (floats), strings
    (also dates, times, uuids, enums, exact numbers as text), booleans, or JSON text.

    Build one with :meth:`numbers`, :meth:`strings`, :meth:`booleans` or :meth:`json`; a computed
    field may also return a plain list, converted by its column type.
    """

    __slots__ = ("kind", "_cells")

    def __init__(self, kind: ColumnKind, cells: Union[Sequence[Any], Texts]) -> None:
        self.kind = ColumnKind(kind)
        self._cells = cells

    @classmethod
    def numbers(cls, cells: Iterable[Optional[float]]) -> Column:
        """A number column."""
        return cls(ColumnKind.NUMBERS, [None if c is None else float(c) for c in cells])

    @classmethod
    def strings(cls, cells: Union[Iterable[Optional[str]], Texts]) -> Column:
        """A string column (packed when it crosses)."""
        return cls(ColumnKind.STRINGS, cells if isinstance(cells, Texts) else list(cells))

    @classmethod
    def booleans(cls, cells: Iterable[Optional[bool]]) -> Column:
        """A boolean column."""
        return cls(ColumnKind.BOOLEANS, [None if c is None else bool(c) for c in cells])

    @classmethod
    def json(cls, values: Iterable[JSON]) -> Column:
        """A JSON column from values (``None`` is a null cell)."""
        return cls(ColumnKind.JSON, [None if v is None else dumps(v) for v in values])

    def __len__(self) -> int:
        return len(self._cells)

    def cells(self) -> list[Any]:
        """The raw cells: floats, strings, booleans or JSON text, ``None`` for nulls."""
        c = self._cells
        return c.cells() if isinstance(c, Texts) else list(c)

    def raw(self) -> Union[Sequence[Any], Texts]:
        """The cells as held (a :class:`Texts` for a packed column)."""
        return self._cells

    def text(self, row: int) -> Optional[str]:
        """The cell as text: strings as they are, numbers as JavaScript prints them, booleans as
        ``true``/``false``, JSON as its text. This is how the agent writes record ids."""
        cell = self._cells[row] if 0 <= row < len(self._cells) else None
        if cell is None:
            return None
        if self.kind is ColumnKind.NUMBERS:
            return js_number(cell)
        if self.kind is ColumnKind.BOOLEANS:
            return "true" if cell else "false"
        return str(cell)

    def value(self, row: int) -> JSON:
        """The cell as a JSON value (``None`` when null or absent)."""
        cell = self._cells[row] if 0 <= row < len(self._cells) else None
        if cell is None:
            return None
        if self.kind is ColumnKind.NUMBERS:
            return json_number(cell)
        if self.kind is ColumnKind.JSON:
            try:
                return json.loads(cell)
            except ValueError:
                return None
        return cell

    def values(self) -> list[JSON]:
        """Every cell as a JSON value."""
        if self.kind is ColumnKind.NUMBERS:
            return [None if c is None else json_number(c) for c in self._cells]  # type: ignore[arg-type]
        if self.kind is ColumnKind.JSON:
            return [self.value(i) for i in range(len(self._cells))]
        return self.cells()

    def to_packed(self) -> Any:
        """The WIT ``packed.column`` (a computed field's answer)."""
        p = _wit.packed
        c = self._cells
        if self.kind is ColumnKind.NUMBERS:
            return p.Column_Numbers(list(c))
        if self.kind is ColumnKind.BOOLEANS:
            return p.Column_Booleans(list(c))
        texts = c if isinstance(c, Texts) else Texts.of(c)
        if self.kind is ColumnKind.STRINGS:
            return p.Column_Strings(texts.to_wit())
        return p.Column_Json(texts.to_wit())

    @classmethod
    def from_wit(cls, data: Any) -> Column:
        """A column from a WIT ``types.column`` or ``packed.column`` case."""
        name = type(data).__name__
        value = data.value
        if name == "Column_Numbers":
            return cls(ColumnKind.NUMBERS, value)
        if name == "Column_Booleans":
            return cls(ColumnKind.BOOLEANS, value)
        kind = ColumnKind.STRINGS if name == "Column_Strings" else ColumnKind.JSON
        if isinstance(value, list):
            return cls(kind, value)
        return cls(kind, Texts(value.text, value.ends, value.nulls))

    def __repr__(self) -> str:
        return f"Column({self.kind.value}, {self.cells()!r})"


class Rows:
    """Rows in columnar form: what a computed field receives (its dependencies, de-duplicated)
    and what :meth:`CollectionRef.list` returns. Columns are named by field or relation path
    (``customer:firstName``).
    """

    __slots__ = ("_len", "_columns")

    def __init__(self, length: int, columns: dict[str, Column]) -> None:
        for name, column in columns.items():
            if len(column) != length:
                raise InternalError(f"column `{name}` has {len(column)} cells for {length} rows")
        self._len = length
        self._columns = columns

    @classmethod
    def from_wit(cls, batch: Any) -> Rows:
        """Rows from a WIT ``types.batch`` or ``packed.batch``."""
        return cls(batch.len, {c.name: Column.from_wit(c.data) for c in batch.columns})

    def __len__(self) -> int:
        return self._len

    def names(self) -> list[str]:
        """The column names, in order."""
        return list(self._columns)

    def column(self, name: str) -> Column:
        """The column with this name."""
        try:
            return self._columns[name]
        except KeyError:
            raise InternalError(f"no column `{name}` in the rows") from None

    def text(self, name: str) -> list[Optional[str]]:
        """A string-like column (strings, dates, uuids, enums; JSON accepted) as a list of
        ``Optional[str]``. A packed column is unpacked once, on the first call."""
        column = self.column(name)
        if column.kind not in (ColumnKind.STRINGS, ColumnKind.JSON):
            raise InternalError(f"column `{name}` does not hold strings")
        return column.cells()

    strings = text

    def texts(self, name: str) -> list[Optional[str]]:
        """Any column as text, one cell per row (see :meth:`Column.text`): the exact text of
        bigints, decimals and bytes, numbers without a needless ``.0``."""
        column = self.column(name)
        return [column.text(i) for i in range(self._len)]

    def numbers(self, name: str) -> list[Optional[float]]:
        """A number column. Exact numbers (bigints, PostgreSQL decimals) come as strings."""
        column = self.column(name)
        if column.kind is not ColumnKind.NUMBERS:
            raise InternalError(f"column `{name}` does not hold numbers")
        return column.cells()

    def booleans(self, name: str) -> list[Optional[bool]]:
        """A boolean column."""
        column = self.column(name)
        if column.kind is not ColumnKind.BOOLEANS:
            raise InternalError(f"column `{name}` does not hold booleans")
        return column.cells()

    def value(self, row: int, name: str) -> JSON:
        """One cell as a JSON value (``None`` for a null cell or an unknown column)."""
        column = self._columns.get(name)
        return None if column is None else column.value(row)

    def record(self, row: int) -> dict[str, JSON]:
        """Row ``row`` as a dict of every column."""
        return {n: c.value(row) for n, c in self._columns.items()}

    def records(self) -> list[dict[str, JSON]]:
        """Every row as a dict."""
        names = list(self._columns)
        columns = [self._columns[n].values() for n in names]
        return [dict(zip(names, cells)) for cells in zip(*columns)] if names else [
            {} for _ in range(self._len)
        ]

    def __iter__(self) -> Iterator[dict[str, JSON]]:
        return iter(self.records())

    def __repr__(self) -> str:
        return f"Rows({self.records()!r})"


# --------------------------------------------------------------------------------------------
# Caller, context, collections
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """The user on whose behalf a handler runs (the spec's Caller)."""

    id: int = 0
    email: str = ""
    first_name: str = ""
    last_name: str = ""
    team: str = ""
    role: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    #: IANA timezone of the request (``Europe/Paris``).
    timezone: str = "UTC"

    @classmethod
    def from_wit(cls, c: Any) -> Caller:
        return cls(c.id, c.email, c.first_name, c.last_name, c.team, c.role,
                   tuple((k, v) for k, v in c.tags), c.timezone)

    def tag(self, key: str) -> Optional[str]:
        """The value of one user tag."""
        return next((v for k, v in self.tags if k == key), None)


def _call(f: Any, *args: Any) -> Any:
    """Calls a host import, turning its WIT error into the SDK's exception."""
    try:
        return f(*args)
    except _wit.Err as e:
        raise from_wit(e.value) from None


class CollectionRef:
    """A collection seen through the host's customized stack, with the caller of the request that
    invoked the handler (their permissions and scopes apply to reads). Filters are condition
    trees in the agent's JSON shape (``{"field": "id", "operator": "Equal", "value": 1}``,
    ``{"aggregator": "And", "conditions": [...]}``) or ``None`` for none.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def list(self, filter: JSON = None, projection: Sequence[str] = (), sort: JSON = None,
             page: Optional[tuple[int, int]] = None) -> Rows:
        """Records matching ``filter`` with the fields of ``projection`` (relation paths
        allowed), sorted (``[{"field": "id", "ascending": True}]``) and paged (``(skip, limit)``).
        """
        _wit.require("CollectionRef.list")
        batch = _call(_wit.collections.list, self.name, dumps(filter), [str(p) for p in projection],
                      dumps(sort), page)
        return Rows.from_wit(batch)

    def aggregate(self, filter: JSON, aggregation: JSON, limit: Optional[int] = None) -> List[Any]:
        """An aggregation (``{"operation": "Sum", "field": "amount", "groups": []}``); returns the
        ``[{"value": .., "group": {..}}]`` list."""
        _wit.require("CollectionRef.aggregate")
        rows: List[Any] = json.loads(_call(_wit.collections.aggregate, self.name, dumps(filter),
                                           dumps(aggregation), limit))
        return rows

    # `List`, not `list`: in this class `list` is the method above.
    def create(self, records: Sequence[dict[str, JSON]]) -> List[dict[str, JSON]]:
        """Creates records; returns them as stored."""
        _wit.require("CollectionRef.create")
        created: List[dict[str, JSON]] = json.loads(
            _call(_wit.collections.create, self.name, dumps(list(records))))
        return created

    def update(self, filter: JSON, patch: dict[str, JSON]) -> None:
        """Applies ``patch`` to every record matching ``filter``."""
        _wit.require("CollectionRef.update")
        _call(_wit.collections.update, self.name, dumps(filter), dumps(patch))

    def delete(self, filter: JSON) -> None:
        """Deletes every record matching ``filter``."""
        _wit.require("CollectionRef.delete")
        _call(_wit.collections.delete, self.name, dumps(filter))

    def __repr__(self) -> str:
        return f"CollectionRef({self.name!r})"


class Context:
    """What every handler receives: who calls, and on which collection."""

    __slots__ = ("_caller", "_wit_caller", "collection_name")

    def __init__(self, caller: Optional[Caller] = None,
                 collection_name: Optional[str] = None) -> None:
        self._caller = caller if caller is not None else Caller()
        self._wit_caller: Any = None
        #: The customized collection (``None`` for datasource charts).
        self.collection_name = collection_name

    @classmethod
    def from_wit(cls, ctx: Any) -> Context:
        # The caller is converted on first use: most computed fields never read it, and every
        # call builds a context.
        context = cls(None, ctx.collection)
        context._wit_caller = ctx.caller
        return context

    @property
    def caller(self) -> Caller:
        """The request's caller."""
        if self._wit_caller is not None:
            self._caller = Caller.from_wit(self._wit_caller)
            self._wit_caller = None
        return self._caller

    def collection(self, name: str) -> CollectionRef:
        """A handle on any collection, through the host's customized stack with this caller."""
        return CollectionRef(name)

    def this(self) -> CollectionRef:
        """A handle on the customized collection itself."""
        if self.collection_name is None:
            raise InternalError("this handler has no collection")
        return CollectionRef(self.collection_name)

    def __repr__(self) -> str:
        return f"Context(caller={self.caller!r}, collection_name={self.collection_name!r})"


# --------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------


class Level(enum.IntEnum):
    """Log levels of :func:`log`."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


def log(level: Level, message: str) -> None:
    """Writes a line to the host's log, prefixed with the plugin's name. Outside a component
    (unit tests) the line is dropped."""
    if not _wit.AVAILABLE:
        return
    _wit.logging.log(_wit.logging.Level(int(level)), message)


__all__ = [
    "JSON", "CanopyError", "Caller", "CollectionRef", "Column", "ColumnKind", "Context", "Level",
    "Rows", "Texts", "as_number", "as_text", "dumps", "js_number", "json_number", "log",
]
