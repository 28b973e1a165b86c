import { NAME_PATTERN } from '../contracts/name-pattern.ts';
import { UsageError } from './context.ts';

/**
 * A name given on the command line (`--workspace`, `--agent`, `--name`, `--by`), held to the
 * rule the contracts apply to workspace and agent names.
 * @throws UsageError saying what a name may hold.
 */
export function nameFlag(flag: string, value: string): string {
  if (!NAME_PATTERN.test(value)) {
    throw new UsageError(`${flag} must be 1 to 63 of a-z, 0-9, _ and -, starting with a letter or digit, not ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * `--agent` of a lookup: an agent's name, or a member's `@<name>` (their own calls are keyed
 * under it, see docs/mcp-http.md, "Over HTTP with a key"), each name held to {@link nameFlag}.
 */
export function callerFlag(value: string): string {
  return value.startsWith('@') ? `@${nameFlag('--agent', value.slice(1))}` : nameFlag('--agent', value);
}
