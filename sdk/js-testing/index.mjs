// Test a built Canopy plugin from `node --test`, as the Node agent's testing package tests an
// agent: `startTestServer` runs `canopy test-server` (a throwaway server with its own temporary
// store, a SQLite database the test seeds, the plugin, a free port) and its `client` calls the
// `/forest` routes as a user with the rights the test gives.
//
//   import { test } from 'node:test';
//   import assert from 'node:assert/strict';
//   import { startTestServer } from '@canopy/testing';
//
//   test('greeting', async () => {
//     const server = await startTestServer({
//       plugin: 'my-plugin.wasm',
//       seedSql: 'CREATE TABLE customers (id INTEGER PRIMARY KEY); INSERT INTO customers VALUES (1);',
//       rights: { collections: { customers: ['browse', 'read'] } },
//     });
//     try {
//       const rows = await server.client.collection('customers').list({ fields: ['id', 'greeting'] });
//       assert.equal(rows[0].greeting, 'Hello, 1');
//     } finally {
//       await server.close();
//     }
//   });
//
// The server is found as $CANOPY_BIN, else `canopy` on the PATH. Only Node's own modules are
// used (child_process, fs, fetch).

import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';

/** The timezone of every request: the routes require one, and UTC keeps dates as stored. */
const TIMEZONE = 'UTC';

/** How long a stopping server may take to finish its requests before it is killed (ms). */
const STOP_GRACE_MS = 10_000;

/** `canopy test-server` could not start (its error output is in the message). */
export class ServerError extends Error {}

/**
 * A route answered with a status other than 2xx: a refused permission (403), an unknown record
 * (404), an action's error result or a hook's refusal (400)…
 */
export class RequestError extends Error {
  constructor(method, path, status, body) {
    super(`${method} ${path} answered ${status}: ${JSON.stringify(body)}`);
    this.method = method;
    this.path = path;
    this.status = status;
    /** The answer's JSON, or its text. */
    this.body = body;
  }

  /** The data routes' first `errors[].detail`, or an action result's `error`. */
  get detail() {
    const body = this.body;
    if (body && typeof body === 'object') {
      const first = Array.isArray(body.errors) ? body.errors[0] : undefined;
      if (first && typeof first.detail === 'string') return first.detail;
      if (typeof body.error === 'string') return body.error;
    }
    return undefined;
  }
}

/**
 * A client of one server's `/forest` routes, as one user. `startTestServer` gives one
 * (`server.client`); build one yourself for another server, e.g. a `canopy serve --server-url`
 * that takes its permissions from a test server: the agent's `createAgentTestClient`.
 */
export class Client {
  /**
   * @param {{forestUrl: string, token: string, schemaPath: string}} options the routes'
   *   base (`http://127.0.0.1:3351/forest`), a session token, and the schema file that server
   *   wrote (each action's route is read from it).
   */
  constructor({ forestUrl, token, schemaPath }) {
    this.forestUrl = forestUrl.replace(/\/+$/, '');
    this.token = token;
    this.schemaPath = schemaPath;
  }

  /** The collection `name`. */
  collection(name) {
    return new Collection(this, name);
  }

  /** The value of the datasource chart `name`: the agent's raw chart value. */
  chart(name) {
    return this.call('GET', `/_charts/${encodeURIComponent(name)}?timezone=${TIMEZONE}`);
  }

  /** @internal Sends a request under the base path and answers its JSON. */
  async call(method, path, body) {
    const headers = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const answer = await fetch(this.forestUrl + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await answer.text();
    let parsed = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    if (!answer.ok) throw new RequestError(method, path, answer.status, parsed);
    return parsed;
  }

  /**
   * @internal The action's route under `forestUrl`, from the schema file's `endpoint` (which
   * carries the action's index among the collection's actions).
   */
  async actionRoute(collection, action) {
    const schema = JSON.parse(await readFile(this.schemaPath, 'utf8'));
    const found = (schema.collections ?? [])
      .filter((c) => c.name === collection)
      .flatMap((c) => c.actions ?? [])
      .find((a) => a.name === action);
    if (!found) {
      throw new Error(
        `the collection ${JSON.stringify(collection)} has no action ${JSON.stringify(action)} ` +
          `(schema file ${this.schemaPath})`,
      );
    }
    // Written as the agent's, `/forest/_actions/…`, whatever the prefix.
    return found.endpoint.replace(/^\/forest/, '');
  }
}

/** One collection of the server. */
export class Collection {
  constructor(client, name) {
    this.client = client;
    this.name = name;
  }

  /**
   * The records selected, as plain objects: attributes, and each to-one relation as the
   * related record's attributes.
   * @param {{fields?: string[], filter?: object, search?: string, sort?: string,
   *   page?: number, pageSize?: number, segment?: string}} [options] `fields` are the
   *   collection's own and `relation.field`; `filter` is a condition tree; `sort` is `name` or
   *   `-name`; `page` counts from 1 (pages of 15 unless `pageSize`).
   */
  async list(options = {}) {
    const query = queryString(this.name, options);
    const document = await this.client.call('GET', `/${encodeURIComponent(this.name)}?${query}`);
    return document.data.map((item) => record(item, document));
  }

  /**
   * How many records are selected; `null` when the collection's count is deactivated.
   * @param {{filter?: object, search?: string, segment?: string}} [options]
   */
  async count(options = {}) {
    const { filter, search, segment } = options;
    const query = queryString(this.name, { filter, search, segment });
    const answer = await this.client.call(
      'GET',
      `/${encodeURIComponent(this.name)}/count?${query}`,
    );
    return typeof answer.count === 'number' ? answer.count : null;
  }

  /** The record with this id (a composite key's parts joined with `|`). */
  async get(id) {
    const document = await this.client.call('GET', this.recordPath(id));
    return record(document.data, document);
  }

  /** Creates a record; answers it as created (hooks and defaults applied). */
  async create(attributes) {
    const body = { data: { type: this.name, attributes } };
    const path = `/${encodeURIComponent(this.name)}?timezone=${TIMEZONE}`;
    const document = await this.client.call('POST', path, body);
    return record(document.data, document);
  }

  /** Changes the given attributes of a record; answers it as updated. */
  async update(id, attributes) {
    const body = { data: { type: this.name, id: String(id), attributes } };
    const document = await this.client.call('PUT', this.recordPath(id), body);
    return record(document.data, document);
  }

  /** Deletes a record. */
  async delete(id) {
    await this.client.call('DELETE', this.recordPath(id));
  }

  /** The action `name` of the collection. */
  action(name) {
    return new Action(this, name);
  }

  /** The value of the collection chart `name` for one record. */
  chart(name, recordId) {
    const query = new URLSearchParams({ timezone: TIMEZONE, record_id: String(recordId) });
    return this.client.call(
      'GET',
      `/_charts/${encodeURIComponent(this.name)}/${encodeURIComponent(name)}?${query}`,
    );
  }

  recordPath(id) {
    return `/${encodeURIComponent(this.name)}/${encodeURIComponent(String(id))}?timezone=${TIMEZONE}`;
  }
}

/** One action of a collection. */
export class Action {
  constructor(collection, name) {
    this.collection = collection;
    this.name = name;
  }

  /**
   * Runs the action on the records `ids` (none for a global action) with the form's `values`
   * by field label. Answers the result (`{success}`, `{html}`, `{webhook}`, `{redirectTo}`); an
   * error result rejects with a `RequestError` 400 whose `detail` is its message.
   */
  execute(values = {}, ids = []) {
    return this.post('', values, ids);
  }

  /** The form as it opens on the records `ids`: its `fields` and `layout`. */
  form(ids = []) {
    return this.post('/hooks/load', {}, ids);
  }

  async post(suffix, values, ids) {
    const client = this.collection.client;
    const route = await client.actionRoute(this.collection.name, this.name);
    const body = {
      data: {
        type: 'custom-action-requests',
        attributes: {
          collection_name: this.collection.name,
          ids: ids.map(String),
          values,
          all_records: false,
          all_records_ids_excluded: [],
          all_records_subset_query: {},
        },
      },
    };
    return client.call('POST', `${route}${suffix}?timezone=${TIMEZONE}`, body);
  }
}

/** A running `canopy test-server`; `close()` stops it and removes its temporary folder. */
export class TestServer {
  constructor(child, ready, exited) {
    this.child = child;
    this.exited = exited;
    /** The whole ready line: url, forestUrl, token, email, schemaPath, databaseUrl, authSecret, envSecret. */
    this.info = ready;
    /** `http://127.0.0.1:PORT` (another Canopy's `--server-url`). */
    this.url = ready.url;
    this.token = ready.token;
    this.email = ready.email;
    this.authSecret = ready.authSecret;
    this.envSecret = ready.envSecret;
    /** A client of the `/forest` routes as the server's user. */
    this.client = new Client(ready);
  }

  /** Stops the server: closes its stdin, waits for it to finish (killing it after 10 s). */
  async close() {
    this.child.stdin.end();
    let timer;
    const killed = new Promise((resolve) => {
      timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        resolve('killed');
      }, STOP_GRACE_MS);
    });
    const outcome = await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    if (outcome === 'killed') {
      throw new ServerError(`canopy test-server did not stop within ${STOP_GRACE_MS} ms: killed`);
    }
  }
}

/**
 * Starts `canopy test-server` and waits until it accepts connections.
 * @param {{plugin?: string | string[], settings?: string, seed?: string | string[],
 *   seedSql?: string, databaseUrl?: string, rights?: object, team?: object, level?: string,
 *   args?: string[], binary?: string}} [options] `plugin`: built components (`.wasm`);
 *   `settings`: the one plugin's `NAME.toml` (it is served as NAME); `seed` (SQL files) and
 *   `seedSql` run on the database first, a new SQLite file unless `databaseUrl` names one;
 *   `rights`: the user's role, as a role of the permissions file (every right by default);
 *   `team`: their team (`{scopes}`); `level`: admin (the default), developer, editor or user;
 *   `args`: any other argument of `canopy test-server`; `binary`: the canopy binary.
 * @returns {Promise<TestServer>}
 */
export async function startTestServer(options = {}) {
  const binary = options.binary ?? process.env.CANOPY_BIN ?? 'canopy';
  const args = ['test-server'];
  for (const path of [options.plugin ?? []].flat()) args.push('--plugin', path);
  if (options.settings !== undefined) args.push('--settings', options.settings);
  for (const path of [options.seed ?? []].flat()) args.push('--seed', path);
  if (options.seedSql !== undefined) args.push('--seed-sql', options.seedSql);
  if (options.databaseUrl !== undefined) args.push('--database-url', options.databaseUrl);
  if (options.rights !== undefined) args.push('--rights', JSON.stringify(options.rights));
  if (options.team !== undefined) args.push('--team', JSON.stringify(options.team));
  if (options.level !== undefined) args.push('--level', options.level);
  args.push(...(options.args ?? []));

  // Without the settings of `canopy serve` the shell may hold for another server
  // (CANOPY_DATABASE_URL, SERVICE_SERVER_URL…): the test server gets only what the test gives
  // it, except the plugin compile cache's folder, which only makes it start faster.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([name]) =>
        !(name.startsWith('CANOPY_') || name.startsWith('SERVICE_')) ||
        name === 'CANOPY_PLUGIN_CACHE_DIR',
    ),
  );
  const child = spawn(binary, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
  // The server's stderr is copied to this process's as it comes (a test shows the server's
  // errors beside its own), and kept for the error of a server that stops before it is ready.
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
    process.stderr.write(chunk);
  });
  const exited = new Promise((resolve) => child.on('close', (code) => resolve(code)));
  const spawned = new Promise((resolve, reject) => {
    child.on('spawn', resolve);
    child.on('error', (error) =>
      reject(
        new ServerError(
          `cannot run ${binary}: ${error.message} (set CANOPY_BIN to the canopy binary, ` +
            'or put canopy on the PATH)',
        ),
      ),
    );
  });
  await spawned;
  const lines = createInterface({ input: child.stdout });
  const line = await new Promise((resolve) => {
    lines.once('line', resolve);
    lines.once('close', () => resolve(''));
  });
  if (!line.trim()) {
    const code = await exited;
    throw new ServerError(
      `canopy test-server stopped before it was ready (exit status ${code}):\n${stderr}`,
    );
  }
  // From here the server does not keep this process alive: a test run that ends without
  // `close()` exits, which closes the pipe and so stops the server.
  for (const handle of [child, child.stdin, child.stdout, child.stderr]) handle.unref();
  return new TestServer(child, JSON.parse(line), exited);
}

/**
 * The agent's query string: `relation.field` fields ask for the relation and, under
 * `fields[relation]`, its fields.
 */
function queryString(collection, { fields, filter, search, sort, page, pageSize, segment }) {
  const query = new URLSearchParams({ timezone: TIMEZONE });
  if (fields !== undefined) {
    const own = [];
    const related = new Map();
    for (const field of fields) {
      const [relation, sub] = field.replace(':', '.').split(/\.(.*)/s);
      if (!own.includes(relation)) own.push(relation);
      if (sub !== undefined) related.set(relation, [...(related.get(relation) ?? []), sub]);
    }
    query.set(`fields[${collection}]`, own.join(','));
    for (const [relation, subs] of related) query.set(`fields[${relation}]`, subs.join(','));
  }
  if (filter !== undefined) query.set('filters', JSON.stringify(filter));
  if (search !== undefined) query.set('search', search);
  if (sort !== undefined) query.set('sort', sort);
  if (segment !== undefined) query.set('segment', segment);
  if (page !== undefined) query.set('page[number]', String(page));
  if (pageSize !== undefined) query.set('page[size]', String(pageSize));
  return query.toString();
}

/**
 * A JSON:API resource as a plain object: its attributes, and each to-one relation sent with
 * data as the included record's attributes (`null` when empty).
 */
function record(item, document) {
  const out = { ...(item.attributes ?? {}) };
  const included = document.included ?? [];
  const resolve = (reference) => {
    const found = included.find((r) => r.type === reference.type && r.id === reference.id);
    return found ? { ...found.attributes } : { id: reference.id };
  };
  for (const [name, relation] of Object.entries(item.relationships ?? {})) {
    if (!('data' in relation)) continue;
    const data = relation.data;
    if (Array.isArray(data)) out[name] = data.map(resolve);
    else out[name] = data ? resolve(data) : null;
  }
  return out;
}
