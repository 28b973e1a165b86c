import type { AgentSettings } from '../contracts/settings.ts';
import type { Tier } from '../contracts/tools.ts';
import type { ErrorCode } from '../errors.ts';
import type { Caller } from './access.ts';

/** What must happen before a call may run. */
export type Gate = { kind: 'run' } | { kind: 'approval' } | { kind: 'refuse'; code: ErrorCode; detail: string };

/**
 * The approval rule: with `approval: "write"` every write waits for a person, a drop waits
 * for a person whatever the setting, and a sandbox run (where nothing can pause) refuses drops
 * outright. People's own clients are fenced by role instead (see access.ts), never parked.
 */
export function gateFor(caller: Caller, tier: Tier): Gate {
  if (caller.kind !== 'agent' || tier === 'read') return { kind: 'run' };
  const settings: AgentSettings = caller.settings;
  if (tier === 'destructive') {
    if (settings.sandbox) {
      return { kind: 'refuse', code: 'SANDBOX_REFUSED', detail: 'DATA_DROP_TABLE is refused in a sandbox run.' };
    }
    return { kind: 'approval' };
  }
  return settings.approval === 'write' ? { kind: 'approval' } : { kind: 'run' };
}
