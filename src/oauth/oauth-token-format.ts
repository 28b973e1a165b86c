import { createHash, randomBytes } from 'node:crypto';

// The shapes of what OAuth hands out: tokens and codes (a prefix, then 32 random bytes), and
// PKCE's verifier and S256 challenge. Checked before any lookup, so a malformed one costs no
// Redis command.

/** Access tokens start so: /mcp tells them from member and agent keys (`adb_`) before any lookup. */
export const ACCESS_TOKEN_PREFIX = 'adbat_';
/** Refresh tokens start so: revocation (RFC 7009) tells them from access tokens. */
export const REFRESH_TOKEN_PREFIX = 'adbrt_';
/** Authorization codes start so. */
export const CODE_PREFIX = 'adbac_';
/** Any token or code agentdb issues: a prefix and 32 bytes of base64url. */
export const TOKEN_SHAPE = /^adb(at|rt|ac)_[A-Za-z0-9_-]{43}$/;

/** A new token or code: `prefix` and 32 random bytes. */
export const mintToken = (prefix: string) => prefix + randomBytes(32).toString('base64url');

/** base64url(sha256(verifier)): PKCE's S256 (RFC 7636 §4.6), the only method accepted. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** A PKCE code verifier, RFC 7636 §4.1: 43 to 128 unreserved characters. */
export const PKCE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
