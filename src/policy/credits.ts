import type { ToolName } from '../contracts/tools.ts';

/** Credits metered per successful call (DESIGN.md "Limits"). */
export const CREDITS: Readonly<Record<ToolName, number>> = {
  DATA_DESCRIBE_SCHEMA: 0,
  DATA_QUERY_SQL: 1,
  DATA_WRITE_SQL: 2,
  DATA_DROP_TABLE: 2,
};
