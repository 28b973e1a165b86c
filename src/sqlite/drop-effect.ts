import { createHash } from 'node:crypto';
import type { Effect } from '../contracts/effect.ts';
import type { DropObject } from '../contracts/drop-object.ts';

/**
 * The effect of dropping `object`: its schema and its rows counted as deleted (they are not
 * listed). The digest covers what the drop checks again before it runs (`DropObject`).
 */
export function dropEffect(object: DropObject): Effect {
  const digest = createHash('sha256')
    .update(JSON.stringify(['drop', object.type, object.name, object.definitionSha256, object.rootpage, object.rows ?? null]))
    .digest('hex');
  return {
    tables: object.type === 'table' ? [{ table: object.name, inserted: 0, updated: 0, deleted: object.rows ?? 0 }] : [],
    rows: [],
    cut: false,
    digest,
    dropped: { type: object.type, name: object.name, definition: object.definition, ...(object.rows === undefined ? {} : { rows: object.rows }) },
  };
}
