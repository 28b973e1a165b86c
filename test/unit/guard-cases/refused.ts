import { REFUSED_NAMES } from './refused-names.ts';
import { REFUSED_STATEMENTS } from './refused-statements.ts';

export type { RefusedGroup } from './refused-types.ts';

/** Every refusal case, for the table test and the property test's generators. */
export const REFUSED = [...REFUSED_STATEMENTS, ...REFUSED_NAMES];
