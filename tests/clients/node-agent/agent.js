// A real @forestadmin/agent whose Forest server is Canopy (host/tests/liana.rs starts it).
// Settings come from the environment; prints `ready <port>` once the agent has started, that
// is once it sent its schema (hash check, upload), subscribed to the server's events and loaded
// its IP whitelist, all from `FOREST_SERVER_URL`.
const { createAgent } = require('@forestadmin/agent');
const { createSqlDataSource } = require('@forestadmin/datasource-sql');

const required = name => {
  const value = process.env[name];
  if (!value) {
    console.error(`${name} is required`);
    process.exit(2);
  }
  return value;
};

async function main() {
  const port = Number(required('AGENT_PORT'));
  const agent = createAgent({
    authSecret: required('FOREST_AUTH_SECRET'),
    envSecret: required('FOREST_ENV_SECRET'),
    forestServerUrl: required('FOREST_SERVER_URL'),
    isProduction: false,
    schemaPath: required('SCHEMA_PATH'),
    typingsPath: null,
    instantCacheRefresh: process.env.INSTANT_CACHE_REFRESH !== 'false',
    loggerLevel: 'Info',
    logger: (level, message) => console.error(`[${level}] ${message}`),
  })
    .addDataSource(createSqlDataSource(required('DATABASE_URL')))
    // An action of the agent's own, which Canopy (its permission server) only knows from the
    // schema the agent uploads.
    .customizeCollection('books', books =>
      books.addAction('Mark as read', {
        scope: 'Single',
        execute: (context, resultBuilder) => resultBuilder.success('Marked as read'),
      }),
    );

  agent.mountOnStandaloneServer(port, '127.0.0.1');
  await agent.start();
  console.log(`ready ${port}`);

  const stop = async () => {
    await agent.stop();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch(error => {
  console.error(`agent failed to start: ${error.stack || error}`);
  process.exit(1);
});
