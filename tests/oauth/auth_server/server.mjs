// A loopback OAuth 2.1 / OpenID authorization server for the test suite (tests/oauth/auth_server.py starts it).
//
//   node server.mjs --port P [--config clients.json] [--prefix .tools/oauth] [--parent-pid PID]
//
// Built on npm's oauth2-mock-server (pinned in package-lock.json beside this file, installed into --prefix by
// tests/oauth/install_auth_server.sh): its key store makes the keys, its issuer signs every JWT, its /authorize
// issues the codes (auto-approved: a straight redirect, no login page) and its /endsession logs out. The package
// has no client registry, no client authentication, no introspection that knows tokens, no resource indicators,
// no token exchange, no key removal and no dynamic registration: this file adds those around it, in front of the
// package's request handler. It listens on 127.0.0.1 only and prints one JSON line, {"ready": true, "issuer": ...},
// on stdout once listening; nothing else goes to stdout. Diagnostics go to stderr.
//
// Endpoints: /.well-known/openid-configuration and /.well-known/oauth-authorization-server (the same metadata),
// /jwks, /authorize, /token (client_credentials, authorization_code + PKCE S256, refresh_token, RFC 8693 token
// exchange; client_secret_basic, client_secret_post, none for public clients), /introspect (RFC 7662), /revoke
// (RFC 7009), /userinfo, /register (RFC 7591), /endsession. Test control under /_test/: token, opaque, rotate,
// stats, stats/reset.

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const HERE = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    port: { type: "string" },
    config: { type: "string" },
    prefix: { type: "string" },
    "parent-pid": { type: "string" },
  },
});
if (!args.port) {
  console.error("usage: node server.mjs --port P [--config file.json] [--prefix dir] [--parent-pid PID]");
  process.exit(2);
}
const PREFIX = resolve(args.prefix ?? process.env.TOOLPLEX_OAUTH_PREFIX ?? join(HERE, "../../../.tools/oauth"));
const requireFromPrefix = createRequire(join(PREFIX, "package.json"));
const { JWKStore, OAuth2Issuer, OAuth2Service } = await import(
  pathToFileURL(requireFromPrefix.resolve("oauth2-mock-server")).href
);

const config = args.config ? JSON.parse(readFileSync(args.config, "utf8")) : {};
const ALGS = ["RS256", "ES256", "EdDSA"];
const DEFAULT_ALG = config.alg ?? "RS256";
const KEY_ALGS = config.algs ?? ALGS;
const TOKEN_TTL = config.access_token_ttl ?? 3600;
const CODE_TTL = 600;
const DEFAULT_SUBJECT = config.subject ?? "johndoe";
const INTROSPECTION_AUTH = config.introspection_auth ?? true;
for (const alg of [DEFAULT_ALG, ...KEY_ALGS]) {
  if (!ALGS.includes(alg)) throw new Error(`unsupported alg ${alg}: one of ${ALGS.join(", ")}`);
}
if (!KEY_ALGS.includes(DEFAULT_ALG)) throw new Error(`alg ${DEFAULT_ALG} is not among algs ${KEY_ALGS.join(", ")}`);

const PORT = Number(args.port);
const ISSUER = `http://127.0.0.1:${PORT}`;
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const TT_ACCESS = "urn:ietf:params:oauth:token-type:access_token";
const TT_JWT = "urn:ietf:params:oauth:token-type:jwt";
const GRANTS = ["authorization_code", "refresh_token", "client_credentials", TOKEN_EXCHANGE];
const AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"];
const ALWAYS_ALLOWED_SCOPES = ["openid", "offline_access"];
const now = () => Math.floor(Date.now() / 1000);

// ---- keys: one current key per algorithm, each in a JWKStore of its own (the package cannot remove a key from a
// store, so a rotation replaces the store). OAuth2Issuer reads its keys through the `keys` getter, overridden here
// so that it signs with the current key of an algorithm (by kid) and never round-robins over several.
class KeyRing {
  #stores = new Map();
  async generate(alg) {
    const store = new JWKStore();
    const jwk = await store.generate(alg, { kid: `${alg.toLowerCase()}-${randomBytes(8).toString("hex")}` });
    const old = this.#stores.get(alg)?.toJSON()[0]?.kid ?? null;
    this.#stores.set(alg, store);
    return { kid_old: old, kid_new: jwk.kid, alg };
  }
  current(alg) {
    return this.#stores.get(alg)?.toJSON()[0];
  }
  // The JWKStore interface OAuth2Issuer.buildToken uses: no kid means the default algorithm's key.
  get(kid) {
    if (kid === undefined) return this.#stores.get(DEFAULT_ALG)?.get();
    for (const store of this.#stores.values()) {
      const key = store.get(kid);
      if (key !== undefined) return key;
    }
    return undefined;
  }
  toJSON() {
    return [...this.#stores.values()].flatMap((store) => store.toJSON()).map((key) => ({ ...key, use: "sig" }));
  }
}

class Issuer extends OAuth2Issuer {
  #ring;
  constructor(ring) {
    super();
    this.#ring = ring;
  }
  get keys() {
    return this.#ring;
  }
}

const ring = new KeyRing();
for (const alg of KEY_ALGS) await ring.generate(alg);
const issuer = new Issuer(ring);
issuer.url = ISSUER;
const service = new OAuth2Service(issuer);

// ---- what this server knows: clients, tokens it issued, codes, refresh tokens, request counts.
const clients = new Map();
for (const client of config.clients ?? []) addClient(client);
const issued = new Map(); // access token (JWT or opaque) -> its claims
const refreshTokens = new Map(); // refresh token -> {client_id, sub, scope, resources, exp}
const codes = new Map(); // authorization code -> what /authorize was asked
const STAT_NAMES = [
  "discovery", "openid_configuration", "oauth_authorization_server", "jwks", "authorize", "token",
  "introspect", "revoke", "userinfo", "register", "endsession", "other",
];
const stats = Object.fromEntries(STAT_NAMES.map((name) => [name, 0]));

function addClient(client) {
  if (typeof client.client_id !== "string" || !client.client_id) throw new Error("a client needs a client_id");
  clients.set(client.client_id, {
    client_id: client.client_id,
    client_secret: client.client_secret ?? null,
    scopes: client.scopes ?? null, // null: any scope
    redirect_uris: client.redirect_uris ?? null, // null: any redirect URI
    grant_types: client.grant_types ?? null, // null: every grant
    access_token_ttl: client.access_token_ttl ?? null, // null: the server's (--config access_token_ttl)
  });
}

class OAuthError extends Error {
  constructor(status, error, description, headers = {}) {
    super(description);
    this.status = status;
    this.error = error;
    this.headers = headers;
  }
}
const invalidRequest = (msg) => new OAuthError(400, "invalid_request", msg);
const invalidClient = (msg) =>
  new OAuthError(401, "invalid_client", msg, { "WWW-Authenticate": 'Basic realm="toolplex-test-as"' });

function sendJson(res, status, body, headers = {}) {
  const content = JSON.stringify(body);
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": Buffer.byteLength(content),
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(content);
}

async function readBody(req, limit = 1 << 20) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > limit) throw new OAuthError(413, "invalid_request", "body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function readForm(req) {
  const type = req.headers["content-type"] ?? "";
  if (!type.toLowerCase().startsWith("application/x-www-form-urlencoded")) {
    throw invalidRequest("the body must be application/x-www-form-urlencoded");
  }
  const form = new URLSearchParams(await readBody(req));
  for (const key of new Set(form.keys())) {
    if (key !== "resource" && key !== "audience" && form.getAll(key).length > 1) {
      throw invalidRequest(`parameter ${key} given more than once`);
    }
  }
  return form;
}

async function readJson(req) {
  const raw = await readBody(req);
  if (!raw) return {};
  try {
    const value = JSON.parse(raw);
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  } catch {
    // fall through
  }
  throw invalidRequest("the body must be a JSON object");
}

// ---- client authentication (RFC 6749 2.3.1): Basic (form-encoded id and secret, raw accepted too), or
// client_id + client_secret in the body, or client_id alone for a public client (no secret registered).
function formDecode(value) {
  try {
    return decodeURIComponent(value.replace(/\+/g, "%20"));
  } catch {
    return value;
  }
}

function secretMatches(given, expected) {
  const a = Buffer.from(given ?? "");
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

function authenticateClient(req, form, { required = true, confidential = false } = {}) {
  const header = req.headers.authorization ?? "";
  let candidates;
  let method;
  if (/^basic\s/i.test(header)) {
    if (form.has("client_secret")) throw invalidRequest("more than one client authentication method");
    const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) throw invalidClient("malformed Basic credentials");
    const id = decoded.slice(0, colon);
    const secret = decoded.slice(colon + 1);
    candidates = [
      [id, secret],
      [formDecode(id), formDecode(secret)],
    ];
    method = "client_secret_basic";
  } else if (form.has("client_secret")) {
    candidates = [[form.get("client_id") ?? "", form.get("client_secret")]];
    method = "client_secret_post";
  } else if (form.has("client_id")) {
    candidates = [[form.get("client_id"), null]];
    method = "none";
  } else {
    if (required) throw invalidClient("client authentication required");
    return null;
  }
  const [id] = candidates.find(([candidate]) => clients.has(candidate)) ?? [];
  const client = clients.get(id);
  if (!client) throw invalidClient("unknown client");
  if (client.client_secret === null) {
    const emptySecret = candidates.every(([, secret]) => !secret);
    if (method !== "none" && !emptySecret) throw invalidClient("a public client has no secret");
    if (confidential) throw invalidClient("this endpoint needs a confidential client");
    return client;
  }
  if (method === "none") throw invalidClient("client authentication required");
  if (!candidates.some(([cid, secret]) => cid === id && secretMatches(secret, client.client_secret))) {
    throw invalidClient("wrong client secret");
  }
  if (form.has("client_id") && form.get("client_id") !== client.client_id) {
    throw invalidRequest("client_id does not match the authenticated client");
  }
  return client;
}

function checkGrant(client, grant) {
  if (client.grant_types && !client.grant_types.includes(grant)) {
    throw new OAuthError(400, "unauthorized_client", `the client may not use ${grant}`);
  }
}

const splitScope = (scope) => (scope ?? "").split(" ").filter(Boolean);

// The scope granted: the one asked for (each allowed for the client), else every scope the client has.
function grantedScope(client, requested) {
  const wanted = [...new Set(splitScope(requested))];
  if (wanted.length === 0) return client.scopes?.length ? client.scopes.join(" ") : undefined;
  const refused = wanted.filter((s) => client.scopes && !client.scopes.includes(s) && !ALWAYS_ALLOWED_SCOPES.includes(s));
  if (refused.length) throw new OAuthError(400, "invalid_scope", `scope not allowed: ${refused.join(" ")}`);
  return wanted.join(" ");
}

// A narrower scope than one already granted (refresh, token exchange), or the same.
function narrowedScope(granted, requested) {
  if (requested === null || requested === undefined || requested === "") return granted;
  const have = splitScope(granted);
  const extra = splitScope(requested).filter((s) => !have.includes(s));
  if (extra.length) throw new OAuthError(400, "invalid_scope", `scope not granted: ${extra.join(" ")}`);
  return [...new Set(splitScope(requested))].join(" ");
}

// RFC 8707: each resource an absolute URI without a fragment.
function resourcesOf(values) {
  for (const value of values) {
    let ok = !value.includes("#");
    try {
      new URL(value);
    } catch {
      ok = false;
    }
    if (!ok) throw new OAuthError(400, "invalid_target", `resource must be an absolute URI without fragment: ${value}`);
  }
  return [...new Set(values)];
}
const audOf = (list) => (list.length === 0 ? undefined : list.length === 1 ? list[0] : list);

function decodePayload(jwt) {
  return JSON.parse(Buffer.from(jwt.split(".")[1], "base64url").toString("utf8"));
}

// Sign with the package's issuer: its defaults (iss, iat, exp = now + expires_in, nbf = now - 10), then the
// claims given (a null claim removes a default). The token is remembered for /introspect.
async function sign(claims, { alg, kid, expiresIn = TOKEN_TTL, header, remember = true } = {}) {
  const chosen = kid ?? ring.current(alg ?? DEFAULT_ALG)?.kid;
  if (!chosen || ring.get(chosen) === undefined) {
    throw invalidRequest(`no current key ${kid ? `with kid ${kid}` : `for ${alg}`}`);
  }
  const token = await issuer.buildToken({
    kid: chosen,
    expiresIn,
    scopesOrTransform: (head, payload) => {
      Object.assign(head, header ?? {});
      for (const [name, value] of Object.entries(claims)) {
        if (value === null || value === undefined) delete payload[name];
        else payload[name] = value;
      }
    },
  });
  if (remember) issued.set(token, decodePayload(token));
  return token;
}

const jti = () => randomBytes(12).toString("base64url");

function active(claims) {
  const t = now();
  if (typeof claims.exp === "number" && claims.exp <= t) return false;
  if (typeof claims.nbf === "number" && claims.nbf > t) return false;
  return true;
}

function newRefreshToken(grant) {
  const token = randomBytes(32).toString("base64url");
  refreshTokens.set(token, { ...grant, exp: now() + 30 * 24 * 3600 });
  return token;
}

function tokenResponse(accessToken, scope, extra = {}) {
  const body = { access_token: accessToken, token_type: "Bearer", expires_in: TOKEN_TTL, ...extra };
  if (scope) body.scope = scope;
  return body;
}

async function accessToken(client, sub, scope, resources, extraClaims = {}) {
  return sign({ sub, client_id: client.client_id, scope, aud: audOf(resources), jti: jti(), ...extraClaims });
}

// ---- /token
async function tokenEndpoint(req, res) {
  const form = await readForm(req);
  const grant = form.get("grant_type");
  if (!grant) throw invalidRequest("grant_type is required");
  if (!GRANTS.includes(grant)) throw new OAuthError(400, "unsupported_grant_type", `unsupported grant ${grant}`);
  const client = authenticateClient(req, form, { confidential: grant === "client_credentials" });
  checkGrant(client, grant);
  let body;
  if (grant === "client_credentials") {
    const scope = grantedScope(client, form.get("scope"));
    const resources = resourcesOf(form.getAll("resource"));
    // A client may have tokens of its own lifetime (`access_token_ttl`): a test of renewal needs no server of its own.
    const ttl = client.access_token_ttl ?? TOKEN_TTL;
    const token = await sign(
      { sub: client.client_id, client_id: client.client_id, scope, aud: audOf(resources), jti: jti() },
      { expiresIn: ttl },
    );
    body = tokenResponse(token, scope, { expires_in: ttl });
  } else if (grant === "authorization_code") {
    const code = form.get("code") ?? "";
    const asked = codes.get(code);
    codes.delete(code); // one use only, even a failed one
    if (!asked || asked.exp <= now()) throw new OAuthError(400, "invalid_grant", "unknown, used or expired code");
    if (asked.client_id !== client.client_id) throw new OAuthError(400, "invalid_grant", "code issued to another client");
    if ((form.get("redirect_uri") ?? asked.redirect_uri) !== asked.redirect_uri) {
      throw new OAuthError(400, "invalid_grant", "redirect_uri differs from the authorization request");
    }
    const verifier = form.get("code_verifier");
    if (!verifier) throw new OAuthError(400, "invalid_grant", "code_verifier is required (PKCE)");
    if (!/^[A-Za-z0-9\-._~]{43,128}$/.test(verifier)) throw new OAuthError(400, "invalid_grant", "malformed code_verifier");
    if (createHash("sha256").update(verifier).digest("base64url") !== asked.code_challenge) {
      throw new OAuthError(400, "invalid_grant", "code_verifier does not match code_challenge");
    }
    const resources = narrowedResources(asked.resources, form.getAll("resource"));
    const token = await accessToken(client, asked.sub, asked.scope, resources);
    const extra = {};
    if (!client.grant_types || client.grant_types.includes("refresh_token")) {
      extra.refresh_token = newRefreshToken({
        client_id: client.client_id, sub: asked.sub, scope: asked.scope, resources: asked.resources,
      });
    }
    if (splitScope(asked.scope).includes("openid")) {
      extra.id_token = await sign(
        { sub: asked.sub, aud: client.client_id, azp: client.client_id, nonce: asked.nonce, auth_time: asked.auth_time },
        { remember: false },
      );
    }
    body = tokenResponse(token, asked.scope, extra);
  } else if (grant === "refresh_token") {
    const old = form.get("refresh_token") ?? "";
    const granted = refreshTokens.get(old);
    if (!granted || granted.exp <= now() || granted.client_id !== client.client_id) {
      throw new OAuthError(400, "invalid_grant", "unknown, revoked or expired refresh token");
    }
    refreshTokens.delete(old); // rotated (OAuth 2.1 4.3.1)
    const scope = narrowedScope(granted.scope, form.get("scope"));
    const resources = narrowedResources(granted.resources, form.getAll("resource"));
    const token = await accessToken(client, granted.sub, scope, resources);
    body = tokenResponse(token, scope, { refresh_token: newRefreshToken({ ...granted }) });
  } else {
    body = await tokenExchange(client, form);
  }
  sendJson(res, 200, body, { Pragma: "no-cache" });
}

// At the token endpoint: the resources asked for, within those of the grant if it named any.
function narrowedResources(granted, requested) {
  const asked = resourcesOf(requested);
  if (asked.length === 0) return granted;
  if (granted.length && asked.some((r) => !granted.includes(r))) {
    throw new OAuthError(400, "invalid_target", "resource not part of the grant");
  }
  return asked;
}

// RFC 8693: a token this server issued (still active) exchanged for an access token for another audience.
async function tokenExchange(client, form) {
  const subjectToken = form.get("subject_token");
  const subjectType = form.get("subject_token_type");
  if (!subjectToken || !subjectType) throw invalidRequest("subject_token and subject_token_type are required");
  if (![TT_ACCESS, TT_JWT].includes(subjectType)) throw invalidRequest(`unsupported subject_token_type ${subjectType}`);
  const requestedType = form.get("requested_token_type") ?? TT_ACCESS;
  if (![TT_ACCESS, TT_JWT].includes(requestedType)) {
    throw invalidRequest(`unsupported requested_token_type ${requestedType}`);
  }
  const subject = issued.get(subjectToken);
  if (!subject || !active(subject)) throw new OAuthError(400, "invalid_grant", "subject_token is not an active token");
  const extra = {};
  const actorToken = form.get("actor_token");
  if (actorToken) {
    const actor = issued.get(actorToken);
    if (!actor || !active(actor)) throw new OAuthError(400, "invalid_grant", "actor_token is not an active token");
    extra.act = { sub: actor.sub };
  }
  const scope = narrowedScope(subject.scope, form.get("scope"));
  const targets = [...resourcesOf(form.getAll("resource")), ...form.getAll("audience")];
  const token = await accessToken(client, subject.sub, scope, [...new Set(targets)], extra);
  return tokenResponse(token, scope, { issued_token_type: requestedType });
}

// ---- /authorize: checked here, then the package's handler makes the code and redirects (auto-approved).
function redirectAllowed(client, uri) {
  if (!client.redirect_uris) return true;
  if (client.redirect_uris.includes(uri)) return true;
  // OAuth 2.1 8.4.2: a loopback redirect URI may use any port.
  const loopback = (u) => ["127.0.0.1", "[::1]", "localhost"].includes(u.hostname) && u.protocol === "http:";
  let given;
  try {
    given = new URL(uri);
  } catch {
    return false;
  }
  return client.redirect_uris.some((registered) => {
    const r = new URL(registered);
    return loopback(r) && loopback(given) && r.hostname === given.hostname && r.pathname === given.pathname
      && r.search === given.search;
  });
}

function authorize(req, res) {
  const query = new URL(req.url, ISSUER).searchParams;
  const client = clients.get(query.get("client_id") ?? "");
  if (!client) throw invalidRequest("unknown client_id");
  const redirectUri = query.get("redirect_uri") ?? (client.redirect_uris?.length === 1 ? client.redirect_uris[0] : null);
  if (!redirectUri || !redirectAllowed(client, redirectUri)) throw invalidRequest("missing or unregistered redirect_uri");
  const back = (error, description) => {
    const url = new URL(redirectUri);
    url.searchParams.set("error", error);
    url.searchParams.set("error_description", description);
    if (query.get("state")) url.searchParams.set("state", query.get("state"));
    url.searchParams.set("iss", ISSUER);
    res.writeHead(302, { Location: url.href });
    res.end();
  };
  if (query.get("response_type") !== "code") return back("unsupported_response_type", "only response_type=code");
  try {
    checkGrant(client, "authorization_code");
  } catch (err) {
    return back(err.error, err.message);
  }
  if (!query.get("code_challenge")) return back("invalid_request", "code_challenge is required (PKCE)");
  if ((query.get("code_challenge_method") ?? "plain") !== "S256") {
    return back("invalid_request", "code_challenge_method must be S256");
  }
  let scope;
  let resources;
  try {
    scope = grantedScope(client, query.get("scope"));
    resources = resourcesOf(query.getAll("resource"));
  } catch (err) {
    return back(err.error, err.message);
  }
  req.toolplexAuthorization = {
    client_id: client.client_id,
    redirect_uri: redirectUri,
    code_challenge: query.get("code_challenge"),
    scope,
    resources,
    nonce: query.get("nonce") ?? undefined,
    sub: query.get("login_hint") || DEFAULT_SUBJECT,
    auth_time: now(),
    exp: now() + CODE_TTL,
  };
  if (!query.get("redirect_uri")) req.url += `&redirect_uri=${encodeURIComponent(redirectUri)}`;
  service.requestHandler(req, res);
}

service.on("beforeAuthorizeRedirect", (redirect, req) => {
  const code = redirect.url.searchParams.get("code");
  if (code && req.toolplexAuthorization) codes.set(code, req.toolplexAuthorization);
  redirect.url.searchParams.set("iss", ISSUER); // RFC 9207
});

// ---- /introspect, /revoke, /userinfo
async function introspect(req, res) {
  const form = await readForm(req);
  if (INTROSPECTION_AUTH) authenticateClient(req, form, { confidential: true });
  const token = form.get("token");
  if (!token) throw invalidRequest("token is required");
  const claims = issued.get(token);
  if (claims && active(claims)) return sendJson(res, 200, { ...claims, active: true, token_type: "Bearer" });
  const refresh = refreshTokens.get(token);
  if (refresh && refresh.exp > now()) {
    const { resources, ...rest } = refresh;
    return sendJson(res, 200, { ...rest, aud: audOf(resources), iss: ISSUER, active: true, token_type: "refresh_token" });
  }
  sendJson(res, 200, { active: false });
}

async function revoke(req, res) {
  const form = await readForm(req);
  const client = authenticateClient(req, form);
  const token = form.get("token");
  if (!token) throw invalidRequest("token is required");
  const owner = issued.get(token)?.client_id ?? refreshTokens.get(token)?.client_id;
  if (owner === undefined || owner === client.client_id) {
    issued.delete(token);
    refreshTokens.delete(token);
  }
  res.writeHead(200, { "Cache-Control": "no-store", "Content-Length": 0 });
  res.end();
}

function userinfo(req, res) {
  const match = /^bearer\s+(.+)$/i.exec(req.headers.authorization ?? "");
  const claims = match ? issued.get(match[1].trim()) : undefined;
  if (!claims || !active(claims)) {
    const challenge = match ? 'Bearer error="invalid_token"' : "Bearer";
    return sendJson(res, 401, { error: "invalid_token" }, { "WWW-Authenticate": challenge });
  }
  sendJson(res, 200, { sub: claims.sub });
}

// ---- /register (RFC 7591), open: no initial access token.
async function register(req, res) {
  const meta = await readJson(req);
  const fail = (error, msg) => new OAuthError(400, error, msg);
  const method = meta.token_endpoint_auth_method ?? "client_secret_basic";
  if (!AUTH_METHODS.includes(method)) throw fail("invalid_client_metadata", `unsupported token_endpoint_auth_method ${method}`);
  const grantTypes = meta.grant_types ?? ["authorization_code"];
  if (!Array.isArray(grantTypes) || grantTypes.some((g) => !GRANTS.includes(g))) {
    throw fail("invalid_client_metadata", "unsupported grant_types");
  }
  const responseTypes = meta.response_types ?? ["code"];
  if (!Array.isArray(responseTypes) || responseTypes.some((t) => t !== "code")) {
    throw fail("invalid_client_metadata", "only response_types [\"code\"]");
  }
  const redirectUris = meta.redirect_uris ?? [];
  const redirectOk = Array.isArray(redirectUris) && redirectUris.every((uri) => {
    try {
      return typeof uri === "string" && !uri.includes("#") && Boolean(new URL(uri));
    } catch {
      return false;
    }
  });
  if (!redirectOk) throw fail("invalid_redirect_uri", "redirect_uris must be absolute URIs without fragment");
  if (grantTypes.includes("authorization_code") && redirectUris.length === 0) {
    throw fail("invalid_redirect_uri", "redirect_uris are required for authorization_code");
  }
  if (meta.scope !== undefined && typeof meta.scope !== "string") throw fail("invalid_client_metadata", "scope is a string");
  const client = {
    client_id: `dyn-${randomBytes(9).toString("base64url")}`,
    client_secret: method === "none" ? null : randomBytes(24).toString("base64url"),
    scopes: meta.scope === undefined ? null : splitScope(meta.scope),
    redirect_uris: redirectUris,
    grant_types: grantTypes,
  };
  addClient(client);
  const answer = {
    ...meta,
    client_id: client.client_id,
    client_id_issued_at: now(),
    token_endpoint_auth_method: method,
    grant_types: grantTypes,
    response_types: responseTypes,
    redirect_uris: redirectUris,
  };
  if (client.client_secret !== null) Object.assign(answer, { client_secret: client.client_secret, client_secret_expires_at: 0 });
  sendJson(res, 201, answer);
}

// ---- metadata: the same document under both well-known names.
function metadata() {
  const scopes = new Set(ALWAYS_ALLOWED_SCOPES);
  for (const client of clients.values()) for (const s of client.scopes ?? []) scopes.add(s);
  return {
    issuer: ISSUER,
    authorization_endpoint: `${ISSUER}/authorize`,
    token_endpoint: `${ISSUER}/token`,
    jwks_uri: `${ISSUER}/jwks`,
    introspection_endpoint: `${ISSUER}/introspect`,
    revocation_endpoint: `${ISSUER}/revoke`,
    registration_endpoint: `${ISSUER}/register`,
    userinfo_endpoint: `${ISSUER}/userinfo`,
    end_session_endpoint: `${ISSUER}/endsession`,
    scopes_supported: [...scopes],
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: GRANTS,
    token_endpoint_auth_methods_supported: AUTH_METHODS,
    introspection_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    revocation_endpoint_auth_methods_supported: AUTH_METHODS,
    code_challenge_methods_supported: ["S256"],
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: KEY_ALGS,
    authorization_response_iss_parameter_supported: true,
  };
}

// ---- /_test/: mint tokens, opaque tokens, rotate keys, read and reset the request counts.
async function testApi(req, res, path) {
  const remote = req.socket.remoteAddress ?? "";
  if (!(remote.startsWith("127.") || remote === "::1" || remote === "::ffff:127.0.0.1")) {
    return sendJson(res, 403, { error: "loopback only" });
  }
  if (req.method === "GET" && path === "/_test/stats") return sendJson(res, 200, stats);
  if (req.method !== "POST") return sendJson(res, 405, { error: "POST" });
  const body = await readJson(req);
  const claims = body.claims ?? {};
  if (typeof claims !== "object" || Array.isArray(claims)) throw invalidRequest("claims must be an object");
  const expiresIn = body.expires_in ?? TOKEN_TTL;
  switch (path) {
    case "/_test/token": {
      const alg = body.alg ?? DEFAULT_ALG;
      if (!ALGS.includes(alg)) throw invalidRequest(`alg must be one of ${ALGS.join(", ")}`);
      const token = await sign(claims, { alg, kid: body.kid, expiresIn, header: body.header });
      const { kid, alg: used } = JSON.parse(Buffer.from(token.split(".")[0], "base64url").toString("utf8"));
      return sendJson(res, 200, { access_token: token, kid, alg: used });
    }
    case "/_test/opaque": {
      const token = randomBytes(32).toString("base64url");
      const t = now();
      const payload = { iss: ISSUER, iat: t, exp: t + expiresIn };
      for (const [name, value] of Object.entries(claims)) {
        if (value === null || value === undefined) delete payload[name];
        else payload[name] = value;
      }
      issued.set(token, payload);
      return sendJson(res, 200, { access_token: token });
    }
    case "/_test/rotate": {
      const alg = body.alg ?? DEFAULT_ALG;
      if (!KEY_ALGS.includes(alg)) throw invalidRequest(`this server holds no ${alg} key (algs: ${KEY_ALGS.join(", ")})`);
      return sendJson(res, 200, await ring.generate(alg));
    }
    case "/_test/stats/reset":
      for (const name of STAT_NAMES) stats[name] = 0;
      return sendJson(res, 200, stats);
    default:
      return sendJson(res, 404, { error: "not_found" });
  }
}

async function handle(req, res) {
  const path = new URL(req.url, ISSUER).pathname.replace(/(.)\/+$/, "$1");
  if (path.startsWith("/_test/")) return testApi(req, res, path);
  const route = `${req.method} ${path}`;
  switch (route) {
    case "GET /.well-known/openid-configuration":
      stats.discovery++;
      stats.openid_configuration++;
      return sendJson(res, 200, metadata(), { "Cache-Control": "no-cache" });
    case "GET /.well-known/oauth-authorization-server":
      stats.discovery++;
      stats.oauth_authorization_server++;
      return sendJson(res, 200, metadata(), { "Cache-Control": "no-cache" });
    case "GET /jwks":
      stats.jwks++;
      return sendJson(res, 200, { keys: ring.toJSON() }, { "Cache-Control": "no-cache" });
    case "GET /authorize":
      stats.authorize++;
      return authorize(req, res);
    case "POST /token":
      stats.token++;
      return tokenEndpoint(req, res);
    case "POST /introspect":
      stats.introspect++;
      return introspect(req, res);
    case "POST /revoke":
      stats.revoke++;
      return revoke(req, res);
    case "GET /userinfo":
    case "POST /userinfo":
      stats.userinfo++;
      return userinfo(req, res);
    case "POST /register":
      stats.register++;
      return register(req, res);
    case "GET /endsession":
      stats.endsession++;
      return service.requestHandler(req, res);
    default:
      stats.other++;
      return sendJson(res, 404, { error: "not_found" });
  }
}

const server = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    if (res.headersSent) return res.destroy();
    if (err instanceof OAuthError) {
      return sendJson(res, err.status, { error: err.error, error_description: err.message }, err.headers);
    }
    console.error("auth server error:", err);
    sendJson(res, 500, { error: "server_error", error_description: String(err?.message ?? err) });
  });
});
server.on("error", (err) => {
  console.error(`auth server: ${err.code ?? ""} ${err.message}`);
  process.exit(1);
});
server.listen(PORT, "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ ready: true, issuer: ISSUER, algs: KEY_ALGS, alg: DEFAULT_ALG })}\n`);
});

// Gone with the test process that started it, even if that one was killed without a chance to stop it.
const parentPid = Number(args["parent-pid"] ?? 0);
if (parentPid > 0) {
  setInterval(() => {
    try {
      process.kill(parentPid, 0);
    } catch {
      process.exit(0);
    }
  }, 500).unref();
}
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => process.exit(0));
