import type { EffectValue } from '../contracts/effect.ts';
import { encodeValue } from './sqlite-values.ts';

// How an effect (sqlite-effect.ts, created-rows.ts) shows a recorded value to a person and binds
// it in its digest, where the JSON a result carries would read two different values alike.

/**
 * A recorded value as a person is shown it: as a result carries it (`encodeValue`), but for a REAL
 * infinity, which JSON writes as `null`. SQLite stores `9e999` as REAL +Inf (and `-9e999` as
 * -Inf); shown as null, an approved `SET k = 9e999` read as clearing the cell (session 35, R9).
 * It is shown as the text `Infinity` or `-Infinity`, and bound as a REAL by {@link exactValue}.
 */
export function effectValue(value: unknown): EffectValue {
  if (typeof value === 'number' && !Number.isFinite(value)) return value > 0 ? 'Infinity' : '-Infinity';
  return encodeValue(value);
}

/**
 * A value as the digest binds it, where its JSON reads like another's: text SQLite holds as bytes
 * that are not UTF-8 reads back with U+FFFD where they were (`x'FF41'` and `x'FE41'` read alike),
 * an INTEGER past 2^53 is written as the text of its digits, a whole REAL (1.0) as the INTEGER
 * (1), and a REAL infinity as NULL (in a result) or as the text `Infinity` (in an effect, by
 * {@link effectValue}). Each is bound as what it is; every other value as it was, so other digests
 * stay the same. `raw` is the value as SQLite gave it (integers as bigint), `hex` reads a text's bytes.
 */
export function exactValue(encoded: unknown, raw: unknown, hex: () => unknown): unknown {
  if (typeof raw === 'number' && !Number.isFinite(raw)) return { $real: raw > 0 ? 'Infinity' : '-Infinity' };
  if (typeof encoded === 'string' && typeof raw === 'string' && raw.includes('\uFFFD')) return { $text: encoded, hex: hex() };
  if (typeof encoded === 'string' && typeof raw === 'bigint') return { $integer: encoded };
  if (typeof encoded === 'number' && typeof raw === 'number' && Number.isInteger(raw)) return { $real: raw };
  return encoded;
}
