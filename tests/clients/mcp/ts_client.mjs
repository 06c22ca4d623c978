// An MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk 1.32.2) for Canopy's
// MCP end-to-end tests. Runs on the machine's node (20 is enough).
//
// The SDK's own OAuth support does the work (protected-resource and authorization-server
// discovery, dynamic client registration, authorization code with PKCE, token); this program
// plays the user on the server's sign-in form, hands the code to `transport.finishAuth`, then
// lists the tools and calls the plan's tools in order. Prints ONE JSON report on stdout (the
// shape python_client.py and inspector_client.mjs print too); diagnostics go to stderr.
//
//   node tests/clients/mcp/ts_client.mjs --url http://127.0.0.1:PORT/mcp --email E --password P \
//     --plan plan.json [--expect-refused] [--check-refresh]
//
// Exit 0 when the run went as expected (an expected refusal included), 1 otherwise.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { checkRefresh, freeLoopbackPort, log as baseLog, signIn, SignInRefused } from './common.mjs';

const log = (...a) => baseLog('ts-client', ...a);

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    email: { type: 'string' },
    password: { type: 'string' },
    plan: { type: 'string' },
    'expect-refused': { type: 'boolean', default: false },
    'check-refresh': { type: 'boolean', default: false },
  },
});
for (const k of ['url', 'email', 'password']) {
  if (!args[k]) {
    console.error(`--${k} is required`);
    process.exit(2);
  }
}
const plan = args.plan ? JSON.parse(readFileSync(args.plan, 'utf8')) : [];
const mcpUrl = new URL(args.url);

const report = {
  client: 'typescript',
  protocolVersion: null,
  tools: [],
  calls: [],
  oauth: null,
  refused: null,
};
const problems = [];

// Which step the last HTTP exchange belonged to, for refusal reports; every exchange is logged.
const stage = { name: 'connect', lastErrorBody: null };
async function tracingFetch(input, init) {
  const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  const method = init?.method ?? (typeof input === 'object' && input.method) ?? 'GET';
  const bare = url.origin + url.pathname;
  if (url.pathname.includes('/.well-known/')) stage.name = 'discovery';
  else if (method === 'POST' && url.pathname.endsWith('/register')) stage.name = 'register';
  else if (method === 'POST' && url.pathname.endsWith('/token')) stage.name = 'token';
  else if (bare === mcpUrl.origin + mcpUrl.pathname) stage.name = 'mcp';
  log('>', method, bare);
  const res = await fetch(input, init);
  log('<', res.status, method, bare);
  if (res.status >= 400 && ['register', 'token', 'discovery'].includes(stage.name)) {
    stage.lastErrorBody = (await res.clone().text()).slice(0, 1000);
  }
  return res;
}

// The in-memory OAuth client provider the SDK drives.
const redirectUrl = `http://127.0.0.1:${await freeLoopbackPort()}/callback`;
const store = { client: undefined, tokens: undefined, verifier: undefined, discovery: undefined, state: undefined };
let authorization = null; // {code, state, iss} after the sign-in
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: 'canopy-test typescript',
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  state() {
    store.state = randomBytes(16).toString('base64url');
    return store.state;
  },
  clientInformation: () => store.client,
  saveClientInformation: (info) => {
    store.client = info;
  },
  tokens: () => store.tokens,
  saveTokens: (tokens) => {
    store.tokens = tokens;
  },
  saveCodeVerifier: (v) => {
    store.verifier = v;
  },
  codeVerifier: () => store.verifier,
  saveDiscoveryState: (s) => {
    store.discovery = s;
  },
  discoveryState: () => store.discovery,
  async redirectToAuthorization(url) {
    log('authorization URL', url.href);
    authorization = await signIn(url.href, args.email, args.password, redirectUrl, (...a) => log(...a));
    if (authorization.state !== store.state) {
      throw new SignInRefused('sign-in', `state mismatch: ${authorization.state} != ${store.state}`);
    }
  },
};

function newTransport() {
  return new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider, fetch: tracingFetch });
}

function textOf(content) {
  return (content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

function refusedFrom(err) {
  if (err instanceof SignInRefused) return { stage: err.stage, error: err.error };
  let error = `${err?.name ?? 'Error'}: ${err?.message ?? String(err)}`;
  if (stage.lastErrorBody && ['register', 'token', 'discovery'].includes(stage.name) && !error.includes(stage.lastErrorBody)) {
    error += ` (${stage.lastErrorBody})`;
  }
  return { stage: stage.name, error };
}

// The SDK sometimes wraps the provider's exception; find ours if it is inside.
function rootCause(err) {
  for (let e = err, depth = 0; e && depth < 10; e = e.cause, depth++) {
    if (e instanceof SignInRefused) return e;
  }
  return err;
}

let client;
try {
  client = new Client({ name: 'canopy-test-typescript', version: '1.0.0' });
  let transport = newTransport();
  try {
    await client.connect(transport);
  } catch (err) {
    if (!(err instanceof UnauthorizedError) || !authorization) throw err;
    log('signed in; finishing the authorization');
    await transport.finishAuth(authorization.code);
    await transport.close().catch(() => {});
    client = new Client({ name: 'canopy-test-typescript', version: '1.0.0' });
    transport = newTransport();
    await client.connect(transport);
  }
  report.protocolVersion = transport.protocolVersion ?? null;
  log('connected, protocol version', report.protocolVersion);
  stage.name = 'mcp';
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : undefined);
    report.tools.push(...page.tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema })));
    cursor = page.nextCursor;
  } while (cursor);
  for (const step of plan) {
    const entry = { name: step.name };
    try {
      const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
      entry.isError = result.isError === true;
      entry.text = textOf(result.content);
      if (result.structuredContent !== undefined) entry.structuredContent = result.structuredContent;
    } catch (err) {
      // A JSON-RPC error answer (e.g. invalid params), or the SDK's own output-schema check;
      // anything else (the connection lost) fails the run.
      if (!(err instanceof McpError)) throw err;
      entry.isError = true;
      entry.text = err?.message ?? String(err);
      entry.protocolError = { code: err?.code ?? null, message: err?.message ?? String(err) };
    }
    report.calls.push(entry);
  }
  await client.close().catch(() => {});
} catch (err) {
  const cause = rootCause(err);
  if (args['expect-refused']) log('refused as expected:', cause?.message ?? String(cause));
  else console.error(err);
  report.refused = refusedFrom(cause);
  if (!args['expect-refused']) problems.push(`the run failed at ${report.refused.stage}: ${report.refused.error}`);
  await client?.close().catch(() => {});
}

if (args['expect-refused'] && report.refused === null) {
  problems.push('the sign-in was expected to be refused but succeeded');
}
if (store.client || store.tokens) {
  report.oauth = {
    clientId: store.client?.client_id ?? null,
    scope: store.tokens?.scope ?? null,
    expiresIn: store.tokens?.expires_in ?? null,
    refresh: null,
  };
}
if (args['check-refresh'] && report.refused === null) {
  const tokenEndpoint = store.discovery?.authorizationServerMetadata?.token_endpoint;
  if (!store.tokens?.refresh_token || !tokenEndpoint || !store.client) {
    report.oauth ??= { clientId: null, scope: null, expiresIn: null };
    report.oauth.refresh = { ok: false, error: 'the OAuth flow produced no refresh token' };
    problems.push('no refresh token to check');
  } else {
    report.oauth.refresh = await checkRefresh({
      tokenEndpoint,
      clientId: store.client.client_id,
      resource: store.discovery?.resourceMetadata?.resource,
      refreshToken: store.tokens.refresh_token,
      log: (...a) => log(...a),
    });
    if (!report.oauth.refresh.ok) problems.push('the refresh-token check did not go as expected');
  }
}

for (const p of problems) log('PROBLEM:', p);
process.stdout.write(JSON.stringify(report) + '\n');
process.exitCode = problems.length ? 1 : 0;
