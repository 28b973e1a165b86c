import { hash, randomBytes } from 'node:crypto';

/** Prefix of every key agentdb mints, so a leaked one is recognisable (secret scanners, logs). */
export const KEY_PREFIX = 'adb_';
/**
 * 32 random bytes → 43 base64url characters. The upper bound only keeps absurd headers from
 * being hashed; keys minted here are always 43.
 */
const KEY_PATTERN = /^adb_[A-Za-z0-9_-]{32,128}$/;

/** A new key: returned once to whoever asked, then kept only as its {@link hashKey}. */
export function mintKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * sha256 of a key, hex. Keys carry 256 random bits, so no salt or slow hash is needed. One-shot
 * `hash` rather than a `createHash` object: every keyed request hashes its key, and the object
 * cost about half as much again.
 */
export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** True when `key` has the shape of a key agentdb mints (checked before any lookup). */
export function isKeyShaped(key: unknown): key is string {
  return typeof key === 'string' && KEY_PATTERN.test(key);
}
