"""An MCP client on the official Python SDK (`mcp` 2.3.0) for Canopy's MCP end-to-end tests.

Runs the SDK's own OAuth support (protected-resource and authorization-server discovery, dynamic
client registration, authorization code with PKCE, token), signing in on the server's sign-in
form itself, then lists the tools and calls the plan's tools in order. Prints ONE JSON report on
stdout (the same shape as ts_client.mjs and inspector_client.mjs); diagnostics go to stderr.

    target/mcp-python/bin/python tests/clients/mcp/python_client.py --mode auto|legacy \
        --url http://127.0.0.1:PORT/mcp --email E --password P --plan plan.json \
        [--expect-refused] [--check-refresh]

`--mode` is the SDK Client's mode: `auto` probes `server/discover` (2026-07-28) and falls back
to `initialize`; `legacy` goes straight to `initialize`. Exit 0 when the run went as expected
(an expected refusal included), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import traceback
import urllib.parse
from html.parser import HTMLParser
from typing import Any

import httpx2
from mcp.client import Client
from mcp.client.auth import (
    AuthorizationCodeResult,
    OAuthClientProvider,
    OAuthFlowError,
    OAuthRegistrationError,
    OAuthTokenError,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken


def log(*args: Any) -> None:
    print("[python-client]", *args, file=sys.stderr, flush=True)


class SignInRefused(Exception):
    """The authorization server refused the sign-in; `stage` says where."""

    def __init__(self, stage: str, error: str):
        super().__init__(f"{stage}: {error}")
        self.stage = stage
        self.error = error


# ------------------------------------------------------------------------- the sign-in form


class FormParser(HTMLParser):
    """Collects the first `<form>`: its method, action, and named inputs and buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.form: dict[str, Any] | None = None
        self.inside = False
        self.done = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v or "") for k, v in attrs}
        if tag == "form" and not self.done and self.form is None:
            self.form = {"method": a.get("method", "get").lower(), "action": a.get("action", ""), "fields": []}
            self.inside = True
        elif self.inside and tag in ("input", "button") and self.form is not None:
            kind = a.get("type", "submit" if tag == "button" else "text").lower()
            self.form["fields"].append({"tag": tag, "type": kind, "name": a.get("name"), "value": a.get("value", "")})

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.inside:
            self.inside = False
            self.done = True

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())


def sign_in_body(form: dict[str, Any], email: str, password: str) -> dict[str, str]:
    body: dict[str, str] = {}
    for f in form["fields"]:
        if f["name"] and f["type"] == "hidden":
            body[f["name"]] = f["value"]
    body["email"] = email
    body["password"] = password
    body["decision"] = "allow"
    return body


async def sign_in(authorization_url: str, email: str, password: str, redirect_uri: str) -> AuthorizationCodeResult:
    """Plays the user: GET the authorization URL (the sign-in page), post the form with the
    credentials and decision=allow, and read code/state/iss off the 302 Location."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as http:
        page = await http.get(authorization_url)
        log("authorize GET", page.status_code)
        if page.status_code != 200:
            raise SignInRefused("authorize", f"HTTP {page.status_code}: {page.text[:500]}")
        parser = FormParser()
        parser.feed(page.text)
        if parser.form is None:
            raise SignInRefused("authorize", f"no <form> on the sign-in page: {page.text[:500]}")
        action = urllib.parse.urljoin(str(page.url), parser.form["action"] or str(page.url))
        # Send the page's cookies back as a browser would on a loopback origin, whatever their
        # flags (a Secure cookie included: browsers treat http://127.0.0.1 as a secure context).
        cookies = [c.split(";", 1)[0].strip() for c in page.headers.get_list("set-cookie")]
        http.cookies.clear()
        answer = await http.post(
            action,
            data=sign_in_body(parser.form, email, password),
            headers={"Cookie": "; ".join(c for c in cookies if c)} if cookies else None,
        )
        log("sign-in POST", answer.status_code)
        if answer.status_code == 200:
            again = FormParser()
            again.feed(answer.text)
            raise SignInRefused("sign-in", "the sign-in form came back: " + " | ".join(again.text)[:500])
        if answer.status_code not in (301, 302, 303, 307, 308):
            raise SignInRefused("sign-in", f"HTTP {answer.status_code}: {answer.text[:500]}")
        location = answer.headers.get("location", "")
        target = urllib.parse.urlsplit(location)
        expected = urllib.parse.urlsplit(redirect_uri)
        if (target.scheme, target.netloc, target.path) != (expected.scheme, expected.netloc, expected.path):
            raise SignInRefused("sign-in", f"redirected elsewhere than the redirect URI: {location}")
        q = dict(urllib.parse.parse_qsl(target.query))
        if "error" in q:
            raise SignInRefused("authorize", f"{q['error']}: {q.get('error_description', '')}".strip(": "))
        if "code" not in q:
            raise SignInRefused("sign-in", f"no code in the redirect: {location}")
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))


# ------------------------------------------------------------------------- OAuth plumbing


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Stage:
    """Which step of the run the last HTTP exchange belonged to, for refusal reports."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = "connect"
        self.last_error_body: str | None = None

    async def on_request(self, request: httpx2.Request) -> None:
        u = str(request.url)
        if "/.well-known/" in u:
            self.name = "discovery"
        elif request.method == "POST" and u.split("?")[0].endswith("/register"):
            self.name = "register"
        elif request.method == "POST" and u.split("?")[0].endswith("/token"):
            self.name = "token"
        elif u.split("?")[0] == self.url:
            self.name = "mcp"
        log(">", request.method, u.split("?")[0])

    async def on_response(self, response: httpx2.Response) -> None:
        log("<", response.status_code, response.request.method, str(response.request.url).split("?")[0])
        if response.status_code >= 400 and self.name in ("register", "token", "discovery"):
            await response.aread()
            self.last_error_body = response.text[:1000]


def refused_from(exc: BaseException, stage: Stage) -> dict[str, str]:
    if isinstance(exc, SignInRefused):
        return {"stage": exc.stage, "error": exc.error}
    if isinstance(exc, OAuthRegistrationError):
        return {"stage": "register", "error": str(exc)}
    if isinstance(exc, OAuthTokenError):
        return {"stage": "token", "error": str(exc)}
    error = f"{type(exc).__name__}: {exc}"
    if stage.last_error_body and stage.name in ("register", "token", "discovery"):
        error += f" ({stage.last_error_body})"
    return {"stage": stage.name, "error": error}


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (possibly nested) exception groups and `__cause__` chains."""
    out: list[BaseException] = []
    stack = [exc]
    while stack:
        e = stack.pop()
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
            continue
        out.append(e)
        if e.__cause__ is not None:
            stack.append(e.__cause__)
        elif e.__context__ is not None and not e.__suppress_context__:
            stack.append(e.__context__)
    return out


def root_cause(exc: BaseException) -> BaseException:
    """The most telling exception: a sign-in refusal or an SDK OAuth error if one is inside."""
    found = leaves(exc)
    for kind in (SignInRefused, OAuthRegistrationError, OAuthTokenError, OAuthFlowError):
        for e in found:
            if isinstance(e, kind):
                return e
    return found[0] if found else exc


# ------------------------------------------------------------------------- refresh check


async def check_refresh(token_endpoint: str, client_id: str, resource: str | None, refresh: str) -> dict[str, Any]:
    """Rotation (old → new pair), reuse of the old token (invalid_grant), then the new one
    (invalid_grant too: the whole family is revoked)."""

    async def use(token: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id}
        if resource:
            form["resource"] = resource
        async with httpx2.AsyncClient(timeout=30) as http:
            r = await http.post(token_endpoint, data=form, headers={"Accept": "application/json"})
        try:
            body: Any = r.json()
        except ValueError:
            body = r.text
        log("refresh", r.status_code, json.dumps(body)[:300])
        return {"status": r.status_code, "body": body}, (body if isinstance(body, dict) else None)

    rotate, fresh = await use(refresh)
    new_refresh = (fresh or {}).get("refresh_token") if rotate["status"] == 200 else None
    rotate["rotated"] = bool(new_refresh) and new_refresh != refresh and bool((fresh or {}).get("access_token"))
    reuse_old, _ = await use(refresh)
    if new_refresh:
        reuse_new, _ = await use(new_refresh)
    else:
        reuse_new = {"status": None, "body": "no new refresh token to present"}

    def is_invalid_grant(step: dict[str, Any]) -> bool:
        return step["status"] == 400 and isinstance(step["body"], dict) and step["body"].get("error") == "invalid_grant"

    ok = rotate["rotated"] and is_invalid_grant(reuse_old) and is_invalid_grant(reuse_new)
    return {"tokenEndpoint": token_endpoint, "rotate": rotate, "reuseOld": reuse_old, "reuseNew": reuse_new, "ok": ok}


# ------------------------------------------------------------------------- the run


def content_text(content: list[Any]) -> str:
    return "\n".join(getattr(c, "text", "") for c in content if getattr(c, "type", None) == "text")


async def run(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    plan = json.load(open(args.plan)) if args.plan else []
    report: dict[str, Any] = {
        "client": f"python-{args.mode}",
        "protocolVersion": None,
        "tools": [],
        "calls": [],
        "oauth": None,
        "refused": None,
    }
    problems: list[str] = []
    redirect_uri = f"http://127.0.0.1:{free_loopback_port()}/callback"
    storage = MemoryStorage()
    pending: dict[str, AuthorizationCodeResult] = {}

    async def redirect_handler(authorization_url: str) -> None:
        log("authorization URL", authorization_url)
        pending["result"] = await sign_in(authorization_url, args.email, args.password, redirect_uri)

    async def callback_handler() -> AuthorizationCodeResult:
        return pending.pop("result")

    provider = OAuthClientProvider(
        server_url=args.url,
        client_metadata=OAuthClientMetadata(
            client_name=f"canopy-test python-{args.mode}",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    stage = Stage(args.url)
    http = httpx2.AsyncClient(
        auth=provider,
        timeout=httpx2.Timeout(30, read=60),
        event_hooks={"request": [stage.on_request], "response": [stage.on_response]},
    )
    try:
        async with http, Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
            report["protocolVersion"] = client.protocol_version
            log("connected, protocol version", client.protocol_version)
            stage.name = "mcp"
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                report["tools"] += [{"name": t.name, "inputSchema": t.input_schema} for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    break
            for step in plan:
                entry: dict[str, Any] = {"name": step["name"]}
                try:
                    result = await client.call_tool(step["name"], step.get("arguments") or {})
                    entry["isError"] = bool(result.is_error)
                    entry["text"] = content_text(result.content)
                    if result.structured_content is not None:
                        entry["structuredContent"] = result.structured_content
                except MCPError as exc:  # a JSON-RPC error answer (e.g. invalid params)
                    entry.update(isError=True, text=str(exc), protocolError={"code": exc.error.code, "message": str(exc)})
                report["calls"].append(entry)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a report
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        cause = root_cause(exc)
        if args.expect_refused:
            log("refused as expected:", f"{type(cause).__name__}: {cause}")
        else:
            traceback.print_exception(exc, file=sys.stderr)
        report["refused"] = refused_from(cause, stage)
        if not args.expect_refused:
            problems.append(f"the run failed at {report['refused']['stage']}: {report['refused']['error']}")

    if args.expect_refused and report["refused"] is None:
        problems.append("the sign-in was expected to be refused but succeeded")

    tokens = storage.tokens
    if storage.client_info is not None or tokens is not None:
        report["oauth"] = {
            "clientId": storage.client_info.client_id if storage.client_info else None,
            "scope": tokens.scope if tokens else None,
            "expiresIn": tokens.expires_in if tokens else None,
            "refresh": None,
        }
    if args.check_refresh and report["refused"] is None:
        md = provider.context.oauth_metadata
        prm = provider.context.protected_resource_metadata
        if tokens is None or not tokens.refresh_token or md is None or storage.client_info is None:
            report["oauth"] = report["oauth"] or {"clientId": None, "scope": None, "expiresIn": None}
            report["oauth"]["refresh"] = {"ok": False, "error": "the OAuth flow produced no refresh token"}
            problems.append("no refresh token to check")
        else:
            resource = str(prm.resource) if prm is not None else None
            refresh = await check_refresh(
                str(md.token_endpoint), storage.client_info.client_id or "", resource, tokens.refresh_token
            )
            report["oauth"]["refresh"] = refresh
            if not refresh["ok"]:
                problems.append("the refresh-token check did not go as expected")
    return report, problems


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True, help="the MCP endpoint URL")
    p.add_argument("--email", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--plan", help="JSON file: an array of {name, arguments} tool calls, in order")
    p.add_argument("--mode", choices=["auto", "legacy"], default="auto")
    p.add_argument("--expect-refused", action="store_true", help="the OAuth sign-in is expected to be refused")
    p.add_argument("--check-refresh", action="store_true", help="check refresh-token rotation and reuse detection")
    args = p.parse_args()
    report, problems = asyncio.run(run(args))
    for problem in problems:
        log("PROBLEM:", problem)
    print(json.dumps(report), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
