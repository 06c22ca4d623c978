"""Test a built plugin from pytest, as the Node agent's testing package tests an agent.

:func:`start_test_server` runs ``canopy test-server`` (a throwaway server with its own
temporary store, a SQLite database the test seeds, the plugin, a free port) and its
:attr:`TestServer.client` calls the ``/forest`` routes as a user with the rights the test gives::

    from canopy_sdk.testing import start_test_server

    def test_greeting() -> None:
        with start_test_server(
            plugin="my-plugin.wasm",
            seed_sql="CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                     "INSERT INTO customers VALUES (1, 'Ada');",
            rights={"collections": {"customers": ["browse", "read"]},
                    "actions": {"customers": ["Say hello"]}},
        ) as server:
            customers = server.client.collection("customers")
            assert customers.list(fields=["id", "greeting"])[0]["greeting"] == "Hello, 1"
            assert customers.action("Say hello").execute({}, ids=["1"]) == {"success": "Hello!"}

The server is found as ``$CANOPY_BIN``, else ``canopy`` on the ``PATH``. Only the standard
library is used (``subprocess``, ``urllib``), and nothing here is imported by a plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any

__all__ = [
    "Action",
    "Client",
    "Collection",
    "RequestError",
    "ServerError",
    "TestServer",
    "start_test_server",
]

#: The timezone of every request: the routes require one, and UTC keeps dates as stored.
TIMEZONE = "UTC"

#: How long a stopping server may take to finish its requests before it is killed (seconds).
STOP_GRACE = 10.0


class ServerError(Exception):
    """``canopy test-server`` could not start (its error output is in the message)."""


class RequestError(Exception):
    """A route answered with a status other than 2xx: a refused permission (403), an unknown
    record (404), an action's error result or a hook's refusal (400)…"""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        super().__init__(f"{method} {path} answered {status}: {json.dumps(body)}")
        self.method = method
        self.path = path
        self.status = status
        #: The answer's JSON, or its text.
        self.body = body

    @property
    def message(self) -> str | None:
        """The data routes' first ``errors[].detail``, or an action result's ``error``."""
        if isinstance(self.body, dict):
            errors = self.body.get("errors")
            if isinstance(errors, list) and errors and isinstance(errors[0], dict):
                detail = errors[0].get("detail")
                if isinstance(detail, str):
                    return detail
            error = self.body.get("error")
            if isinstance(error, str):
                return error
        return None


class Client:
    """A client of one server's ``/forest`` routes, as one user.

    :func:`start_test_server` gives one (:attr:`TestServer.client`); build one yourself for
    another server, e.g. a ``canopy serve --server-url`` that takes its permissions from a test
    server, with its ``forest_url``, a token and the schema file it wrote.
    """

    def __init__(self, forest_url: str, token: str, schema_path: str | os.PathLike[str]) -> None:
        self.forest_url = forest_url.rstrip("/")
        self.token = token
        self.schema_path = Path(schema_path)

    def collection(self, name: str) -> Collection:
        """The collection ``name``."""
        return Collection(self, name)

    def chart(self, name: str) -> Any:
        """The value of the datasource chart ``name`` (a plugin's chart on the datasource): the
        agent's raw chart value, e.g. ``{"countCurrent": 3}``."""
        return self._call("GET", f"/_charts/{_quote(name)}?timezone={TIMEZONE}")

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.forest_url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as answer:
                return _parse(answer.read())
        except urllib.error.HTTPError as error:
            raise RequestError(method, path, error.code, _parse(error.read())) from None

    def _action_route(self, collection: str, action: str) -> str:
        """The action's route under ``forest_url``, from the schema file's ``endpoint`` (which
        carries the action's index among the collection's actions)."""
        schema = json.loads(self.schema_path.read_text())
        for candidate in schema.get("collections", []):
            if candidate.get("name") != collection:
                continue
            for found in candidate.get("actions", []):
                if found.get("name") == action:
                    endpoint: str = found["endpoint"]
                    # Written as the agent's, `/forest/_actions/…`, whatever the prefix.
                    return endpoint.removeprefix("/forest")
        raise LookupError(
            f"the collection {collection!r} has no action {action!r} "
            f"(schema file {self.schema_path})"
        )


class Collection:
    """One collection of the server."""

    def __init__(self, client: Client, name: str) -> None:
        self.client = client
        self.name = name

    def list(
        self,
        *,
        fields: Iterable[str] | None = None,
        filter: dict[str, Any] | None = None,
        search: str | None = None,
        sort: str | None = None,
        page: int | None = None,
        page_size: int | None = None,
        segment: str | None = None,
    ) -> list[dict[str, Any]]:
        """The records selected, as plain dicts: attributes, and each to-one relation as the
        related record's attributes. ``fields`` are the collection's own and ``relation.field``;
        ``filter`` is a condition tree (``{"field", "operator", "value"}``); ``sort`` is
        ``name`` or ``-name``; ``page`` counts from 1 (pages of 15 unless ``page_size``)."""
        query = _query(self.name, fields, filter, search, sort, page, page_size, segment)
        document = self.client._call("GET", f"/{_quote(self.name)}?{query}")
        return [_record(item, document) for item in document["data"]]

    def count(
        self,
        *,
        filter: dict[str, Any] | None = None,
        search: str | None = None,
        segment: str | None = None,
    ) -> int | None:
        """How many records are selected; ``None`` when the collection's count is deactivated
        (a plugin may turn it off)."""
        query = _query(self.name, None, filter, search, None, None, None, segment)
        answer = self.client._call("GET", f"/{_quote(self.name)}/count?{query}")
        count = answer.get("count")
        return count if isinstance(count, int) else None

    def get(self, id: str) -> dict[str, Any]:
        """The record with this id (a composite key's parts joined with ``|``)."""
        document = self.client._call("GET", self._record_path(id))
        return _record(document["data"], document)

    def create(self, attributes: dict[str, Any]) -> dict[str, Any]:
        """Creates a record; answers it as created (hooks and defaults applied)."""
        body = {"data": {"type": self.name, "attributes": attributes}}
        path = f"/{_quote(self.name)}?timezone={TIMEZONE}"
        document = self.client._call("POST", path, body)
        return _record(document["data"], document)

    def update(self, id: str, attributes: dict[str, Any]) -> dict[str, Any]:
        """Changes the given attributes of a record; answers it as updated."""
        body = {"data": {"type": self.name, "id": id, "attributes": attributes}}
        document = self.client._call("PUT", self._record_path(id), body)
        return _record(document["data"], document)

    def delete(self, id: str) -> None:
        """Deletes a record."""
        self.client._call("DELETE", self._record_path(id))

    def action(self, name: str) -> Action:
        """The action ``name`` of the collection."""
        return Action(self, name)

    def chart(self, name: str, record_id: str) -> Any:
        """The value of the collection chart ``name`` for one record."""
        query = urllib.parse.urlencode({"timezone": TIMEZONE, "record_id": record_id})
        return self.client._call("GET", f"/_charts/{_quote(self.name)}/{_quote(name)}?{query}")

    def _record_path(self, id: str) -> str:
        return f"/{_quote(self.name)}/{_quote(id)}?timezone={TIMEZONE}"


class Action:
    """One action of a collection."""

    def __init__(self, collection: Collection, name: str) -> None:
        self.collection = collection
        self.name = name

    def execute(self, values: dict[str, Any] | None = None, ids: Sequence[str] = ()) -> Any:
        """Runs the action on the records ``ids`` (none for a global action) with the form's
        ``values`` by field label. Answers the result (``{"success": message}``, ``{"html"}``,
        ``{"webhook"}``, ``{"redirectTo"}``); an error result is a :class:`RequestError` 400
        whose :attr:`~RequestError.message` is its message."""
        return self._post("", values or {}, ids)

    def form(self, ids: Sequence[str] = ()) -> Any:
        """The form as it opens on the records ``ids``: its ``fields`` and ``layout``."""
        return self._post("/hooks/load", {}, ids)

    def _post(self, suffix: str, values: dict[str, Any], ids: Sequence[str]) -> Any:
        route = self.collection.client._action_route(self.collection.name, self.name)
        body = {
            "data": {
                "type": "custom-action-requests",
                "attributes": {
                    "collection_name": self.collection.name,
                    "ids": [str(i) for i in ids],
                    "values": values,
                    "all_records": False,
                    "all_records_ids_excluded": [],
                    "all_records_subset_query": {},
                },
            }
        }
        return self.collection.client._call("POST", f"{route}{suffix}?timezone={TIMEZONE}", body)


class TestServer:
    """A running ``canopy test-server``; a context manager that stops it on exit (or call
    :meth:`close`). Its temporary folder goes with it."""

    # Not a test class, whatever its name: pytest collects `Test*` classes of test modules.
    __test__ = False

    def __init__(self, process: subprocess.Popen[str], ready: dict[str, Any]) -> None:
        self._process = process
        #: The whole ready line: url, forestUrl, token, email, schemaPath, databaseUrl,
        #: authSecret, envSecret.
        self.info = ready
        #: ``http://127.0.0.1:PORT`` (another Canopy's ``--server-url``).
        self.url: str = ready["url"]
        self.token: str = ready["token"]
        self.email: str = ready["email"]
        self.auth_secret: str = ready["authSecret"]
        self.env_secret: str = ready["envSecret"]
        #: A client of the ``/forest`` routes as the server's user.
        self.client = Client(ready["forestUrl"], ready["token"], ready["schemaPath"])

    def close(self) -> None:
        """Stops the server: closes its stdin, waits for it to finish its requests (killing it
        after 10 s)."""
        if self._process.stdin and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise ServerError(f"canopy test-server did not stop within {STOP_GRACE} s: killed")

    def __enter__(self) -> TestServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def start_test_server(
    *,
    plugin: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
    settings: str | os.PathLike[str] | None = None,
    seed: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] = (),
    seed_sql: str | None = None,
    database_url: str | None = None,
    rights: dict[str, Any] | None = None,
    team: dict[str, Any] | None = None,
    level: str | None = None,
    args: Sequence[str] = (),
    binary: str | os.PathLike[str] | None = None,
) -> TestServer:
    """Starts ``canopy test-server`` and waits until it accepts connections.

    ``plugin``: built components (``.wasm``) to serve; ``settings``: the one plugin's
    ``NAME.toml`` (it is served as ``NAME``). ``seed`` (SQL files) and ``seed_sql`` run on the
    database first, a new SQLite file unless ``database_url`` names one. ``rights``: the user's
    role, as a role of the permissions file (``{"collections": {"customers": ["browse"]},
    "actions": {"customers": ["Say hello"]}}``; every right by default); ``team``: their team
    (``{"scopes": {...}}``); ``level``: ``admin`` (the default), ``developer``, ``editor`` or
    ``user``. ``args``: any other argument of ``canopy test-server``. ``binary``: the canopy
    binary (default ``$CANOPY_BIN``, else ``canopy`` on the ``PATH``).
    """
    command = [str(binary or os.environ.get("CANOPY_BIN") or "canopy"), "test-server"]
    for path in _paths(plugin):
        command += ["--plugin", path]
    if settings is not None:
        command += ["--settings", os.fspath(settings)]
    for path in _paths(seed):
        command += ["--seed", path]
    if seed_sql is not None:
        command += ["--seed-sql", seed_sql]
    if database_url is not None:
        command += ["--database-url", database_url]
    if rights is not None:
        command += ["--rights", json.dumps(rights)]
    if team is not None:
        command += ["--team", json.dumps(team)]
    if level is not None:
        command += ["--level", level]
    command += list(args)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_own_settings_only(os.environ),
        )
    except OSError as error:
        raise ServerError(
            f"cannot run {command[0]}: {error} (set CANOPY_BIN to the canopy binary, "
            "or put canopy on the PATH)"
        ) from None
    stderr = _forward(process.stderr)
    line = process.stdout.readline() if process.stdout else ""
    if not line.strip():
        status = process.wait()
        stderr.join()
        raise ServerError(
            f"canopy test-server stopped before it was ready (exit status {status}):\n"
            + "".join(stderr.lines)
        )
    return TestServer(process, json.loads(line))


def _own_settings_only(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment without the settings of ``canopy serve`` the shell may hold for another
    server (``CANOPY_DATABASE_URL``, ``SERVICE_SERVER_URL``…): the test server gets only what the
    test gives it, except the plugin compile cache's folder, which only makes it start faster."""
    return {
        name: value
        for name, value in environ.items()
        if not name.startswith(("CANOPY_", "SERVICE_")) or name == "CANOPY_PLUGIN_CACHE_DIR"
    }


class _Forwarder(threading.Thread):
    """Copies the server's stderr to this process's as it comes (a test shows the server's
    errors beside its own), keeping it for the error of a server that stops before it is
    ready."""

    def __init__(self, stream: IO[str] | None) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.lines: list[str] = []

    def run(self) -> None:
        if self.stream is None:
            return
        for line in self.stream:
            self.lines.append(line)
            sys.stderr.write(line)


def _forward(stream: IO[str] | None) -> _Forwarder:
    forwarder = _Forwarder(stream)
    forwarder.start()
    return forwarder


def _paths(value: str | os.PathLike[str] | Sequence[str | os.PathLike[str]]) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(v) for v in value]


def _quote(segment: str) -> str:
    return urllib.parse.quote(str(segment), safe="")


def _parse(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _query(
    collection: str,
    fields: Iterable[str] | None,
    filter: dict[str, Any] | None,
    search: str | None,
    sort: str | None,
    page: int | None,
    page_size: int | None,
    segment: str | None,
) -> str:
    """The agent's query string: ``relation.field`` fields ask for the relation and, under
    ``fields[relation]``, its fields."""
    pairs: list[tuple[str, str]] = [("timezone", TIMEZONE)]
    if fields is not None:
        own: list[str] = []
        related: dict[str, list[str]] = {}
        for field in fields:
            relation, dot, sub = field.replace(":", ".").partition(".")
            if relation not in own:
                own.append(relation)
            if dot:
                related.setdefault(relation, []).append(sub)
        pairs.append((f"fields[{collection}]", ",".join(own)))
        pairs += [(f"fields[{r}]", ",".join(subs)) for r, subs in related.items()]
    if filter is not None:
        pairs.append(("filters", json.dumps(filter)))
    for key, value in (("search", search), ("sort", sort), ("segment", segment)):
        if value is not None:
            pairs.append((key, value))
    if page is not None:
        pairs.append(("page[number]", str(page)))
    if page_size is not None:
        pairs.append(("page[size]", str(page_size)))
    return urllib.parse.urlencode(pairs)


def _record(item: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    """A JSON:API resource as a plain dict: its attributes, and each to-one relation sent with
    data as the included record's attributes (``None`` when empty)."""
    record = dict(item.get("attributes") or {})
    included = document.get("included") or []

    def resolve(reference: dict[str, Any]) -> dict[str, Any]:
        for resource in included:
            if resource.get("type") == reference.get("type") and resource.get("id") == reference.get("id"):
                return dict(resource.get("attributes") or {})
        return {"id": reference.get("id")}

    for name, relation in (item.get("relationships") or {}).items():
        if "data" not in relation:
            continue
        data = relation["data"]
        if isinstance(data, dict):
            record[name] = resolve(data)
        elif isinstance(data, list):
            record[name] = [resolve(d) for d in data]
        else:
            record[name] = None
    return record
