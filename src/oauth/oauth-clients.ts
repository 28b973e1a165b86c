import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { InvalidClientError, InvalidClientMetadataError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { OAuthClientMetadataSchema, type OAuthClientInformationFull } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Keys } from '../redis/keys.ts';
import { type ScriptedRedis, withScripts } from '../redis/lua-scripts.ts';
import { hashKey } from '../registry/secret-key.ts';
import { type FetchDocument, isDocumentClientId, readDocument, safeFetch } from './client-metadata-document.ts';
import { rateSource, rateSource48 } from './oauth-rate-source.ts';
import { redirectUriAllowed } from './redirect-uri.ts';
import { RetryLaterError, spendOne } from './oauth-token-requests.ts';

/**
 * Registration refused because the service keeps its most unconsented clients (429
 * `too_many_requests`, as the per-address limit, with when to try again).
 */
export class RegistrationsFullError extends RetryLaterError {}

/** A client as registered (RFC 7591): what the consent page names and the token endpoint checks. */
export interface OAuthClient {
  clientId: string;
  clientName: string;
  redirectUris: string[];
  /** `none` (a public client, PKCE alone) or a secret sent in the body or Basic header. */
  authMethod: AuthMethod;
  /** sha256 of the client secret; absent for a public client. */
  secretHash?: string;
  createdAt: number;
  /** A client id metadata document's host: who vouches for the client's name and redirect URIs. */
  documentHost?: string;
}

export type AuthMethod = 'none' | 'client_secret_post' | 'client_secret_basic';
export const AUTH_METHODS: readonly AuthMethod[] = ['none', 'client_secret_post', 'client_secret_basic'];

/**
 * How long a registration is kept while no grant holds it. Registration is open to anyone (that
 * is what DCR is for), so one nobody signs in through goes after a day; a grant keeps its client
 * as long as the grant's refresh token, and a client whose last grant is dropped goes back to
 * this (OAuthGrants): a fixed 90 days at consent kept every client a member ever consented to,
 * past the 50 grants a member keeps (hostile review T3).
 */
export const CLIENT_UNUSED_TTL_S = 24 * 3600;
/**
 * Registrations one address may make per hour. A client registers once per install (or per
 * sign-in when it forgets); together with {@link CLIENT_UNUSED_TTL_S} this bounds what anyone
 * can make agentdb keep without signing in: 24 × this many small records per address.
 */
export const REGISTRATIONS_PER_HOUR = 30;

/**
 * Registrations an hour from one IPv6 /48 (a site's allocation, 65,536 /64s), besides each /64's
 * {@link REGISTRATIONS_PER_HOUR}: counted by /64 alone, one hosting /48 filled the service-wide
 * cap of unconsented clients in an hour (334 /64s) and kept registration closed to everyone
 * (review 19, H29). Filling it now takes a hundred /48s.
 */
export const REGISTRATIONS_PER_48_PER_HOUR = 100;
/**
 * Client id metadata documents one address may have agentdb read per hour (a read of one in the
 * cache is free). The token endpoint reads one for anyone who names its URL, signed in or not.
 */
export const DOCUMENT_READS_PER_HOUR = 30;
/**
 * Documents read an hour for one IPv6 /48, besides each /64's {@link DOCUMENT_READS_PER_HOUR}:
 * counted by /64 alone, one /48 (65,536 /64s) could have agentdb fetch two million URLs of its
 * choosing an hour and keep each document read (up to {@link MAX_CLIENT_BYTES}) for an hour,
 * about 8 GB of Redis, without signing in (hostile review T1, as H29 was for registrations).
 */
export const DOCUMENT_READS_PER_48_PER_HOUR = 100;
/** How long a client id metadata document read is used before it is read again. */
const DOCUMENT_CACHE_S = 3600;
/** Bounds what one registration may store: a client with more is not one a person uses. */
const MAX_REDIRECT_URIS = 10;
/**
 * The most a client's record may take in Redis (its JSON), registered or read from a document:
 * the name and redirect URIs of real clients come to a few hundred bytes.
 */
export const MAX_CLIENT_BYTES = 4096;

/** OAUTH_UNCONSENTED_CLIENTS_MAX's default. */
export const UNCONSENTED_CLIENTS_MAX = 10_000;

/**
 * Registered OAuth clients in Redis, by client id. Dynamic client registration (RFC 7591) is
 * the way the MCP SDK client, Claude and ChatGPT connectors introduce themselves. Registration
 * is open to anyone, so what it can make agentdb keep is bounded twice: per address
 * ({@link REGISTRATIONS_PER_HOUR}) and service-wide (`unconsentedMax` clients nobody has signed
 * in through, each for {@link CLIENT_UNUSED_TTL_S}), so many addresses together cannot fill Redis.
 */
export class OAuthClients {
  private readonly limiter: RateLimiterRedis;
  private readonly limiter48: RateLimiterRedis;
  private readonly documentReads: RateLimiterRedis;
  private readonly documentReads48: RateLimiterRedis;
  private readonly scripted: ScriptedRedis;

  /**
   * @param fetchDocument reads a client id metadata document (default: from public addresses only).
   * @param unconsentedMax OAUTH_UNCONSENTED_CLIENTS_MAX.
   */
  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly fetchDocument: FetchDocument = safeFetch,
    private readonly unconsentedMax = UNCONSENTED_CLIENTS_MAX,
  ) {
    this.scripted = withScripts(redis);
    this.limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'register'),
      points: REGISTRATIONS_PER_HOUR,
      duration: 3600,
      inMemoryBlockOnConsumed: REGISTRATIONS_PER_HOUR + 1,
    });
    this.limiter48 = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'register48'),
      points: REGISTRATIONS_PER_48_PER_HOUR,
      duration: 3600,
      inMemoryBlockOnConsumed: REGISTRATIONS_PER_48_PER_HOUR + 1,
    });
    this.documentReads = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'document'),
      points: DOCUMENT_READS_PER_HOUR,
      duration: 3600,
      inMemoryBlockOnConsumed: DOCUMENT_READS_PER_HOUR + 1,
    });
    this.documentReads48 = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: keys.oauth('rate', 'document48'),
      points: DOCUMENT_READS_PER_48_PER_HOUR,
      duration: 3600,
      inMemoryBlockOnConsumed: DOCUMENT_READS_PER_48_PER_HOUR + 1,
    });
  }

  /**
   * Registers a client from its metadata (validated by the SDK's RFC 7591 schema) and answers
   * the registration response; a confidential client's secret is in it this once, and only its
   * hash is kept.
   * @param source the address registering, counted (by {@link rateSource}) against {@link REGISTRATIONS_PER_HOUR}.
   * @throws InvalidClientMetadataError for metadata agentdb does not accept, or past {@link MAX_CLIENT_BYTES}.
   * @throws TooManyRequestsError past the address's registrations this hour.
   * @throws RegistrationsFullError while the service keeps its most unconsented clients.
   */
  async register(metadata: unknown, source: string): Promise<OAuthClientInformationFull> {
    const parsed = OAuthClientMetadataSchema.safeParse(metadata);
    if (!parsed.success) throw new InvalidClientMetadataError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
    const m = parsed.data;
    const uris = m.redirect_uris.map(String);
    if (uris.length === 0 || uris.length > MAX_REDIRECT_URIS) throw new InvalidClientMetadataError(`redirect_uris: give 1 to ${MAX_REDIRECT_URIS}.`);
    const bad = uris.find((u) => !redirectUriAllowed(u));
    if (bad) throw new InvalidClientMetadataError(`redirect_uris: ${bad.slice(0, 200)} is not https, an http loopback address or an app's own scheme.`);
    const authMethod = (m.token_endpoint_auth_method ?? 'client_secret_basic') as AuthMethod;
    if (!AUTH_METHODS.includes(authMethod)) throw new InvalidClientMetadataError(`token_endpoint_auth_method: one of ${AUTH_METHODS.join(', ')}.`);
    const grants = m.grant_types ?? ['authorization_code'];
    if (grants.some((g) => g !== 'authorization_code' && g !== 'refresh_token'))
      throw new InvalidClientMetadataError('grant_types: only authorization_code and refresh_token.');
    if ((m.response_types ?? ['code']).some((r) => r !== 'code')) throw new InvalidClientMetadataError('response_types: only code.');

    const clientId = `adbc_${randomBytes(16).toString('base64url')}`;
    const secret = authMethod === 'none' ? undefined : `adbs_${randomBytes(32).toString('base64url')}`;
    const createdAt = Date.now();
    const client: OAuthClient = {
      clientId,
      clientName: (m.client_name ?? '').trim().slice(0, 100) || 'An unnamed app',
      redirectUris: uris,
      authMethod,
      ...(secret ? { secretHash: hashKey(secret) } : {}),
      createdAt,
    };
    const record = JSON.stringify(client);
    if (Buffer.byteLength(record) > MAX_CLIENT_BYTES)
      throw new InvalidClientMetadataError(`The client's name and redirect_uris come to more than ${MAX_CLIENT_BYTES} bytes.`);
    await this.spend(this.limiter, source, `At most ${REGISTRATIONS_PER_HOUR} registrations an hour from one address`);
    const of48 = rateSource48(source);
    if (of48) await this.spend(this.limiter48, of48, `At most ${REGISTRATIONS_PER_48_PER_HOUR} registrations an hour from one IPv6 /48`, false);
    const lapsesAt = createdAt + CLIENT_UNUSED_TTL_S * 1000;
    const [taken, , first] = await this.scripted.agentdbOauthClientSlot(
      this.unconsented(),
      String(createdAt),
      clientId,
      String(lapsesAt),
      String(this.unconsentedMax),
    );
    if (taken !== 1) {
      const waitS = Math.max(1, Math.ceil(((Number(first) || lapsesAt) - createdAt) / 1000));
      throw new RegistrationsFullError(
        `agentdb keeps at most ${this.unconsentedMax} registered apps that nobody has signed in through yet, and has that many: try again in ${waitS} s.`,
        waitS,
      );
    }
    await this.redis.set(this.keys.oauth('client', clientId), record, 'EX', CLIENT_UNUSED_TTL_S);
    return {
      ...m,
      redirect_uris: uris,
      client_name: client.clientName,
      token_endpoint_auth_method: authMethod,
      grant_types: grants,
      response_types: ['code'],
      client_id: clientId,
      client_id_issued_at: Math.floor(createdAt / 1000),
      ...(secret ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
    };
  }

  /** Counts one against `limiter` for `source`'s {@link rateSource} (`bySource` false: `source` itself), or throws 429's error. */
  private async spend(limiter: RateLimiterRedis, source: string, what: string, bySource = true): Promise<void> {
    await spendOne(limiter, bySource ? rateSource(source) : source, what);
  }

  /**
   * The client `clientId`: a registered one, or one whose id is the URL of its metadata
   * document; undefined when unknown, lapsed, or its document cannot be read or is refused.
   * @param source the address asking: a document not in the cache is read only within its
   *   {@link DOCUMENT_READS_PER_HOUR}.
   * @throws TooManyRequestsError past the address's (or its IPv6 /48's) document reads this hour.
   */
  async get(clientId: string, source: string): Promise<OAuthClient | undefined> {
    if (isDocumentClientId(clientId)) return this.fromDocument(clientId, source);
    if (!/^adbc_[A-Za-z0-9_-]{10,64}$/.test(clientId)) return undefined;
    const raw = await this.redis.get(this.keys.oauth('client', clientId));
    return raw ? (JSON.parse(raw) as OAuthClient) : undefined;
  }

  /**
   * A person consented to the client: it no longer counts against the unconsented cap. How long it
   * is kept is its grants' to say (OAuthGrants holds it while one may issue tokens).
   */
  async consented(clientId: string): Promise<void> {
    if (isDocumentClientId(clientId)) return;
    await this.redis.zrem(this.unconsented(), clientId);
  }

  /** The service's registered clients nobody has signed in through yet, and the metadata documents kept, by when each lapses. */
  private unconsented(): string {
    return this.keys.oauth('clients', 'unconsented');
  }

  private async fromDocument(clientId: string, source: string): Promise<OAuthClient | undefined> {
    const key = this.keys.oauth('client', `doc:${hashKey(clientId)}`);
    const cached = await this.redis.get(key);
    if (cached) return JSON.parse(cached) as OAuthClient;
    await this.spend(this.documentReads, source, `At most ${DOCUMENT_READS_PER_HOUR} client metadata documents read an hour for one address`);
    const of48 = rateSource48(source);
    if (of48)
      await this.spend(this.documentReads48, of48, `At most ${DOCUMENT_READS_PER_48_PER_HOUR} client metadata documents read an hour for one IPv6 /48`, false);
    let doc: unknown;
    try {
      doc = await this.fetchDocument(clientId);
    } catch {
      return undefined;
    }
    const read = readDocument(clientId, doc);
    if ('refused' in read) return undefined;
    const host = new URL(clientId).host;
    if (read.redirectUris.length === 0 || read.redirectUris.length > MAX_REDIRECT_URIS || !read.redirectUris.every(redirectUriAllowed)) return undefined;
    const client: OAuthClient = {
      clientId,
      clientName: read.clientName || host,
      redirectUris: read.redirectUris,
      authMethod: 'none',
      createdAt: Date.now(),
      documentHost: host,
    };
    const record = JSON.stringify(client);
    if (Buffer.byteLength(record) > MAX_CLIENT_BYTES) return undefined;
    // Read for a token request without a sign-in, so kept only in a place among the apps nobody has
    // signed in through, as registrations are (before session 33 only per address: many addresses
    // filled Redis). Past the cap it answers this request and is not kept.
    const now = Date.now();
    const [taken] = await this.scripted.agentdbOauthClientSlot(
      this.unconsented(),
      String(now),
      `doc:${hashKey(clientId)}`,
      String(now + DOCUMENT_CACHE_S * 1000),
      String(this.unconsentedMax),
    );
    if (taken === 1) await this.redis.set(key, record, 'EX', DOCUMENT_CACHE_S);
    return client;
  }

  /**
   * The client a token or revocation request authenticates as: its id, and its secret when it
   * registered one (RFC 6749 §2.3.1).
   * @param source the address asking (see {@link get}).
   * @throws InvalidClientError for an unknown client or a wrong or missing secret.
   * @throws TooManyRequestsError past the address's document reads this hour.
   */
  async authenticate(clientId: string | undefined, secret: string | undefined, source: string): Promise<OAuthClient> {
    const client = clientId ? await this.get(clientId, source) : undefined;
    if (!client) throw new InvalidClientError('Unknown client_id: register the client again.');
    if (client.authMethod === 'none') return client;
    if (!secret || !client.secretHash) throw new InvalidClientError('This client authenticates with its client_secret.');
    const a = Buffer.from(hashKey(secret));
    const b = Buffer.from(client.secretHash);
    if (a.length !== b.length || !timingSafeEqual(a, b)) throw new InvalidClientError('The client_secret is wrong.');
    return client;
  }
}
