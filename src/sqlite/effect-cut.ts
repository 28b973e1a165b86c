import { MAX_EFFECT_VALUE_BYTES, type EffectLimits, type EffectRow, type EffectValue } from '../contracts/effect.ts';

// A recorded row as a person is shown it and its effect is kept: each value past
// MAX_EFFECT_VALUE_BYTES cut to its start, so that one huge value cannot fill the approval
// record (the digest, taken before, still covers it whole). Used by EffectRecorder (sqlite-effect.ts).

/**
 * The rows an effect shows, within its `limits`: each {@link shorten}ed; once one does not fit,
 * no more are kept (`full`: the caller only hashes the rest) and the effect is marked cut.
 */
export class ShownRows {
  readonly rows: EffectRow[] = [];
  cut = false;
  full = false;
  // The JSON array's brackets.
  private bytes = 2;

  constructor(private readonly limits: EffectLimits) {}

  add(row: EffectRow): void {
    const shown = shorten(row);
    const size = Buffer.byteLength(JSON.stringify(shown.row)) + 1;
    if (this.rows.length >= this.limits.maxRows || this.bytes + size > this.limits.maxBytes) {
      this.full = this.cut = true;
      return;
    }
    this.bytes += size;
    if (shown.cut) this.cut = true;
    this.rows.push(shown.row);
  }
}

/** A row with each value past MAX_EFFECT_VALUE_BYTES replaced by its start (`{ $cut, bytes }`). */
export function shorten(row: EffectRow): { row: EffectRow; cut: boolean } {
  let cut = false;
  const each = (values: Record<string, EffectValue> | null) => {
    if (!values) return null;
    const out: Record<string, EffectValue> = {};
    for (const [k, v] of Object.entries(values)) {
      const short = shortValue(v);
      if (short !== v) cut = true;
      out[k] = short;
    }
    return out;
  };
  const shown = { ...row, key: each(row.key)!, before: each(row.before), after: each(row.after) };
  return { row: shown, cut };
}

/** `v`, or its start when past MAX_EFFECT_VALUE_BYTES: text cut on a character, a blob on a byte. */
function shortValue(v: EffectValue): EffectValue {
  if (typeof v === 'string') {
    const bytes = Buffer.byteLength(v);
    if (bytes <= MAX_EFFECT_VALUE_BYTES) return v;
    const head = Buffer.from(v)
      .subarray(0, MAX_EFFECT_VALUE_BYTES)
      .toString('utf8')
      .replace(/\uFFFD$/, '');
    return { $cut: head, bytes };
  }
  if (v !== null && typeof v === 'object' && '$blob' in v) {
    const bytes = Buffer.from(v.$blob, 'base64').length;
    if (bytes <= MAX_EFFECT_VALUE_BYTES) return v;
    return { $cut: Buffer.from(v.$blob, 'base64').subarray(0, MAX_EFFECT_VALUE_BYTES).toString('base64'), bytes };
  }
  return v;
}

/**
 * The names whose value is bound as made when it runs (`{ $volatile }`, with its type or clock
 * form): a row's `madeAtRun`, so that a person does not take the preview's rowid or time for what commits.
 */
export function madeNames(names: string[], values: unknown[]): string[] {
  return names.filter((_, i) => typeof values[i] === 'object' && values[i] !== null && '$volatile' in (values[i] as object));
}
