// What ts_client.mjs and inspector_client.mjs share: playing the user on the sign-in form, the
// refresh-token check, a free loopback port, stderr logging. Plain Node (no dependency), so it
// runs under the machine's node and under the Node 22 binary alike.
import net from 'node:net';

const HTTP_TIMEOUT_MS = 30_000;

export function log(who, ...args) {
  process.stderr.write(`[${who}] ${args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ')}\n`);
}

/** The authorization server refused the sign-in; `stage` says where. */
export class SignInRefused extends Error {
  constructor(stage, error) {
    super(`${stage}: ${error}`);
    this.name = 'SignInRefused';
    this.stage = stage;
    this.error = error;
  }
}

export function freeLoopbackPort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function decodeEntities(s) {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|amp|lt|gt|quot|apos|#39);/gi, (m, e) => {
    const k = e.toLowerCase();
    if (k === 'amp') return '&';
    if (k === 'lt') return '<';
    if (k === 'gt') return '>';
    if (k === 'quot') return '"';
    if (k === 'apos' || k === '#39') return "'";
    if (k.startsWith('#x')) return String.fromCodePoint(parseInt(k.slice(2), 16));
    if (k.startsWith('#')) return String.fromCodePoint(parseInt(k.slice(1), 10));
    return m;
  });
}

function attributes(tag) {
  const out = {};
  const re = /([^\s=/>"']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?/g;
  const body = tag.replace(/^<\s*[a-z0-9]+/i, '').replace(/\/?>$/, '');
  for (const m of body.matchAll(re)) out[m[1].toLowerCase()] = decodeEntities(m[2] ?? m[3] ?? m[4] ?? '');
  return out;
}

/** The first `<form>` of a page: method, action and its named inputs and buttons. */
export function parseForm(html) {
  const open = /<form\b[^>]*>/i.exec(html);
  if (!open) return null;
  const rest = html.slice(open.index + open[0].length);
  const end = rest.search(/<\/form\s*>/i);
  const inner = end >= 0 ? rest.slice(0, end) : rest;
  const a = attributes(open[0]);
  const fields = [];
  for (const m of inner.matchAll(/<(input|button)\b[^>]*>/gi)) {
    const f = attributes(m[0]);
    const tag = m[1].toLowerCase();
    fields.push({ tag, type: (f.type ?? (tag === 'button' ? 'submit' : 'text')).toLowerCase(), name: f.name, value: f.value ?? '' });
  }
  return { method: (a.method ?? 'get').toLowerCase(), action: a.action ?? '', fields };
}

function pageText(html) {
  return decodeEntities(
    html
      .replace(/<(script|style)\b[\s\S]*?<\/\1>/gi, ' ')
      .replace(/<[^>]+>/g, ' | ')
      .replace(/\s+/g, ' '),
  )
    .split('|')
    .map((s) => s.trim())
    .filter(Boolean)
    .join(' | ');
}

function cookiesOf(res) {
  const list = typeof res.headers.getSetCookie === 'function' ? res.headers.getSetCookie() : [];
  return list.map((c) => c.split(';')[0].trim()).filter(Boolean);
}

/**
 * Plays the user: GET the authorization URL (the sign-in page), post its form with the
 * credentials and decision=allow (the page's cookie sent back), and read the redirect.
 * Returns {code, state, iss, location}; throws SignInRefused when the server says no.
 */
export async function signIn(authorizationUrl, email, password, redirectUri, logf = () => {}) {
  const page = await fetch(authorizationUrl, { redirect: 'manual', signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
  const html = await page.text();
  logf('authorize GET', page.status);
  if (page.status !== 200) throw new SignInRefused('authorize', `HTTP ${page.status}: ${html.slice(0, 500)}`);
  const form = parseForm(html);
  if (!form) throw new SignInRefused('authorize', `no <form> on the sign-in page: ${html.slice(0, 500)}`);
  const body = new URLSearchParams();
  for (const f of form.fields) if (f.name && f.type === 'hidden') body.append(f.name, f.value);
  body.set('email', email);
  body.set('password', password);
  body.set('decision', 'allow');
  const action = new URL(form.action || page.url || authorizationUrl, page.url || authorizationUrl);
  const cookies = cookiesOf(page);
  const answer = await fetch(action, {
    method: 'POST',
    redirect: 'manual',
    signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(cookies.length ? { cookie: cookies.join('; ') } : {}),
    },
    body: body.toString(),
  });
  const answerText = await answer.text();
  logf('sign-in POST', answer.status);
  if (answer.status === 200) {
    throw new SignInRefused('sign-in', `the sign-in form came back: ${pageText(answerText).slice(0, 500)}`);
  }
  if (![301, 302, 303, 307, 308].includes(answer.status)) {
    throw new SignInRefused('sign-in', `HTTP ${answer.status}: ${answerText.slice(0, 500)}`);
  }
  const location = answer.headers.get('location') ?? '';
  const target = new URL(location, action);
  const expected = new URL(redirectUri);
  if (target.origin !== expected.origin || target.pathname !== expected.pathname) {
    throw new SignInRefused('sign-in', `redirected elsewhere than the redirect URI: ${location}`);
  }
  const q = target.searchParams;
  if (q.has('error')) {
    throw new SignInRefused('authorize', [q.get('error'), q.get('error_description')].filter(Boolean).join(': '));
  }
  if (!q.has('code')) throw new SignInRefused('sign-in', `no code in the redirect: ${location}`);
  return { code: q.get('code'), state: q.get('state'), iss: q.get('iss'), location: target.href };
}

/**
 * The refresh-token check: the refresh token rotates (a new pair), presenting the old one again
 * is invalid_grant, and so is then the new one (the whole family is revoked).
 */
export async function checkRefresh({ tokenEndpoint, clientId, resource, refreshToken, log: logf = () => {} }) {
  async function use(token) {
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
    if (resource) form.set('resource', resource);
    const res = await fetch(tokenEndpoint, {
      method: 'POST',
      signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: form.toString(),
    });
    const text = await res.text();
    let body;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    logf('refresh', res.status, JSON.stringify(body).slice(0, 300));
    return { status: res.status, body };
  }
  const rotate = await use(refreshToken);
  const fresh = rotate.status === 200 && rotate.body && typeof rotate.body === 'object' ? rotate.body : null;
  const newRefresh = fresh?.refresh_token;
  rotate.rotated = Boolean(newRefresh) && newRefresh !== refreshToken && Boolean(fresh?.access_token);
  const reuseOld = await use(refreshToken);
  const reuseNew = newRefresh ? await use(newRefresh) : { status: null, body: 'no new refresh token to present' };
  const invalidGrant = (s) => s.status === 400 && s.body && typeof s.body === 'object' && s.body.error === 'invalid_grant';
  const ok = rotate.rotated && invalidGrant(reuseOld) && invalidGrant(reuseNew);
  return { tokenEndpoint, rotate, reuseOld, reuseNew, ok };
}

/**
 * RFC 9728 then RFC 8414 discovery by hand (for the Inspector, whose discovery happens inside
 * its own process): returns {resource, issuer, tokenEndpoint} or throws.
 */
export async function discover(mcpUrl) {
  const u = new URL(mcpUrl);
  let prmUrl;
  const probe = await fetch(u, {
    method: 'POST',
    signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  await probe.arrayBuffer();
  const m = /resource_metadata="([^"]+)"/.exec(probe.headers.get('www-authenticate') ?? '');
  if (m) prmUrl = m[1];
  else prmUrl = `${u.origin}/.well-known/oauth-protected-resource${u.pathname.replace(/\/$/, '')}`;
  const prm = await (await fetch(prmUrl, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) })).json();
  const issuer = new URL(prm.authorization_servers[0]);
  const path = issuer.pathname === '/' ? '' : issuer.pathname.replace(/\/$/, '');
  const asm = await (
    await fetch(`${issuer.origin}/.well-known/oauth-authorization-server${path}`, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) })
  ).json();
  return { resource: prm.resource, issuer: asm.issuer, tokenEndpoint: asm.token_endpoint };
}
