/**
 * One issue of a failed validation: where (a path into the input, empty for the input itself)
 * and what. A zod issue is one; so is a Fastify schema error once its `instancePath` is split.
 */
export interface Issue {
  readonly path: readonly PropertyKey[];
  readonly message: string;
}

/** More than this many issues add length to an answer, not help: a caller fixes the first few and sends again. */
const MAX_ISSUES = 5;

/**
 * The one wording of a validation failure, for every adapter (HTTP routes, tool calls through
 * the queue, MCP): up to five issues, each `path: message` (the message alone when it is about
 * the whole input), joined by `; `. It becomes the detail of an INVALID_ARGUMENTS error, after
 * the registry's message, so the caller reads which field to fix.
 */
export function describeIssues(issues: readonly Issue[]): string {
  return issues
    .slice(0, MAX_ISSUES)
    .map((i) => (i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message))
    .join('; ');
}
