import type { ToolName } from '../contracts/tools.ts';
import type { ErrorCode } from '../errors.ts';

/**
 * Credits metered per successful call (DESIGN.md "Limits"). A description costs what a query
 * does: free, 50 describes of 12 tables × 380 long column names put 105 MB into Redis in 5.5 s
 * (issue 27); it reads the schema and counts rows as a query reads.
 */
export const CREDITS: Readonly<Record<ToolName, number>> = {
  DATA_DESCRIBE_SCHEMA: 1,
  DATA_QUERY_SQL: 1,
  DATA_WRITE_SQL: 2,
  DATA_DROP_TABLE: 2,
};

/**
 * Failures metered like a completed call of their tool. A statement stopped at its deadline or
 * for its memory has held the executor (and killed a child) as long as any statement can; left
 * free, a hostile agent could burn a worker at no cost by failing on purpose.
 */
export const METERED_FAILURES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['STATEMENT_TIMEOUT', 'RESOURCE_LIMIT']);
