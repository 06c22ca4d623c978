// The `kit-rust` plugin, built, served by a throwaway Canopy and called from `node --test` as a
// user who may browse, read and add customers and say hello, but not delete. (Copied into a
// plugin made by `canopy plugin new kit-rust` as `test/plugin.test.mjs` by
// host/tests/testing_kit.rs, with @canopy/testing installed from sdk/js-testing.)

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { RequestError, startTestServer } from '@canopy/testing';

const HERE = fileURLToPath(new URL('..', import.meta.url));
const TARGET = process.env.CARGO_TARGET_DIR ?? join(HERE, 'target');

const SEED = `CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
              INSERT INTO customers (id, name) VALUES (1, 'Ada'), (2, 'Grace');`;

test('the plugin serves its field, action and chart within the user’s rights', async () => {
  const server = await startTestServer({
    plugin: join(TARGET, 'wasm32-wasip2/release/kit_rust.wasm'),
    settings: join(HERE, 'kit-rust.toml'),
    seedSql: SEED,
    rights: {
      collections: { customers: ['browse', 'read', 'add'] },
      actions: { customers: ['Say hello'] },
    },
    level: 'user',
  });
  try {
    const customers = server.client.collection('customers');

    assert.deepEqual(await customers.list({ fields: ['id', 'greeting'], sort: 'id' }), [
      { id: 1, greeting: 'Hello from kit-rust, 1' },
      { id: 2, greeting: 'Hello from kit-rust, 2' },
    ]);
    const ada = { field: 'name', operator: 'equal', value: 'Ada' };
    assert.equal(await customers.count({ filter: ada }), 1);

    assert.deepEqual((await customers.action('Say hello').form(['2'])).fields, []);
    const said = await customers.action('Say hello').execute({}, ['2']);
    assert.equal(said.success, 'Hello from kit-rust to record 2');

    assert.deepEqual(await customers.chart('Seven', '1'), { countCurrent: 7 });
    assert.deepEqual(await server.client.chart('Greetings'), { countCurrent: 42 });

    assert.equal((await customers.create({ name: 'Linus' })).id, 3);
    assert.equal((await customers.get('3')).greeting, 'Hello from kit-rust, 3');
    assert.equal(await customers.count(), 3);

    await assert.rejects(customers.delete('3'), (error) => {
      assert.ok(error instanceof RequestError);
      assert.equal(error.status, 403);
      return true;
    });
  } finally {
    await server.close();
  }
});
