// An entry as src/index.ts is one: names re-exported, one under another name.
export { bare, Documented, Documented as DocumentedAlias, documented } from './declared.ts';
export type { Either, Shape, Widened } from './declared.ts';
