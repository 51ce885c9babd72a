// An OpenID Connect provider on loopback for the SSO tests: panva's oidc-provider (OpenID
// certified), configured as a company's identity provider would be for evalsite: one
// confidential client, the code flow with PKCE required, RS256 ID tokens, a `groups` claim.
//
// node provider.mjs '{"clientId": ..., "clientSecret": ..., "redirectUris": [...]}'
// prints {"issuer": "http://127.0.0.1:PORT"} on its first line once it listens.
//
// Knobs for the tests (POST, JSON body), never part of a real provider:
//   /_test/accounts  {"alice": {"email": ..., "groups": [...]}}: the accounts and their claims,
//                    read at every sign-in (so a group removed here is gone at the next one)
//   /_test/clock     {"offset": -7200}: the provider's clock runs that many seconds off, so the
//                    tokens it signs from then on are as a provider with a wrong clock signs them
// The sign-in page is oidc-provider's own development form: any login name, any password.
import http from 'node:http';

import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const options = JSON.parse(process.argv[2]);
const accounts = new Map();
let clockOffset = 0;
const realNow = Date.now;
Date.now = () => realNow() + clockOffset * 1000;

const server = http.createServer();
await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'loopback-1', alg: 'RS256', use: 'sig' };
const SCOPES = 'openid email profile groups';

const provider = new Provider(issuer, {
  clients: [{
    client_id: options.clientId,
    client_secret: options.clientSecret,
    redirect_uris: options.redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  jwks: { keys: [signingKey] },
  cookies: { keys: ['loopback-cookie-key'] },
  // A confidential client need not send PKCE by default; here it must, as the issue asks.
  pkce: { required: () => true },
  scopes: SCOPES.split(' '),
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    groups: ['groups'],
  },
  async findAccount(ctx, id) {
    return { accountId: id, claims: async () => ({ sub: id, ...(accounts.get(id) || {}) }) };
  },
  // evalsite is a first-party client: no consent page, every scope it asks for is granted.
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope(SCOPES);
    await grant.save();
    return grant;
  },
  ttl: {
    AccessToken: 3600, AuthorizationCode: 600, IdToken: 3600, Grant: 3600, Interaction: 3600, Session: 3600,
  },
});
provider.on('server_error', (ctx, err) => { console.error('server_error', err); });

const readJson = (req) => new Promise((resolve, reject) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => { try { resolve(JSON.parse(body || '{}')); } catch (err) { reject(err); } });
});

const handle = provider.callback();
server.on('request', async (req, res) => {
  if (req.method === 'POST' && req.url.startsWith('/_test/')) {
    const body = await readJson(req);
    if (req.url === '/_test/accounts') {
      for (const [id, claims] of Object.entries(body)) accounts.set(id, claims);
    } else if (req.url === '/_test/clock') {
      clockOffset = body.offset;
    } else {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(204).end();
    return;
  }
  handle(req, res);
});

console.log(JSON.stringify({ issuer }));
