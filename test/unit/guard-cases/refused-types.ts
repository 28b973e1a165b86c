/**
 * Statements the guard must refuse, grouped by why. Each group names the tools it is tried
 * with (q = guardQuery, w = guardWrite, i = guardIntrospection), the code, and a pattern the
 * reason must match so the agent is told what to do instead.
 */
export interface RefusedGroup {
  why: string;
  code: 'SQL_SYNTAX' | 'SQL_MULTIPLE_STATEMENTS' | 'SQL_REFUSED';
  reason: RegExp;
  tools: ReadonlyArray<'q' | 'w' | 'i'>;
  sql: readonly string[];
}
