// A real OpenID Connect provider for the login end-to-end tests (tests/e2e/login_oidc.rs), built
// on the `oidc-provider` package with its development interactions (a login form, then a consent
// form, both plain HTML).
//
// Environment:
//   REDIRECT_URI   Canopy's OpenID callback, the one redirect URI of the one client
//   CLIENT_ID      client id (default canopy)
//   CLIENT_SECRET  client secret (default canopy-secret)
//   ACCOUNTS       JSON object: login name -> the claims of that account (sub is the login)
//
// Listens on 127.0.0.1 on a free port and prints one line, `issuer <url>`, once it serves.
// The development login form takes any password: the accounts are the test's known users, and
// an unknown login is refused when the provider looks the account up.
import http from 'node:http';
import Provider from 'oidc-provider';

const accounts = JSON.parse(process.env.ACCOUNTS || '{}');
const redirectUri = process.env.REDIRECT_URI;
if (!redirectUri) {
  console.error('REDIRECT_URI is required');
  process.exit(2);
}

let handler = (req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = http.createServer((req, res) => handler(req, res));
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: process.env.CLIENT_ID || 'canopy',
        client_secret: process.env.CLIENT_SECRET || 'canopy-secret',
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'given_name', 'family_name', 'groups', 'canopy_role'],
    },
    async findAccount(ctx, id) {
      const claims = accounts[id];
      if (!claims) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...claims }) };
    },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['canopy-login-test'] },
  });
  handler = provider.callback();
  console.log(`issuer ${issuer}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
