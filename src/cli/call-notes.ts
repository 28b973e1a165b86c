import type { AwaitingAnswer, PendingAnswer } from '../calls/client.ts';

// What `agentdb call` says on stderr while a waited call is not finished, so a person at the
// terminal knows what it waits for and what to do. stdout keeps only the envelope.

/** A parked call: who must act, with the commands that decide it. */
export function parkedNote(a: AwaitingAnswer): string {
  const id = a.approval.id;
  return (
    `agentdb call: call ${a.callId} waits for a person to approve it (approval ${id}, expires ${a.approval.expiresAt}). Decide it with your member key in AGENTDB_MEMBER_KEY or a file:\n` +
    `  agentdb approvals approve ${id} --key-file MEMBER_KEY_FILE [--reason R]\n` +
    `  agentdb approvals reject ${id} --key-file MEMBER_KEY_FILE [--reason R]\n` +
    'Still waiting; Ctrl-C stops waiting and leaves the call parked.\n'
  );
}

/** A call no worker has taken yet: it keeps waiting, but the person may have no worker running. */
export function queuedNote(callId: string, afterMs: number, timeoutMs: number, prefix: string): string {
  return (
    `agentdb call: no worker has taken call ${callId} after ${afterMs / 1000} s; still waiting, up to --timeout ${timeoutMs / 1000} s. ` +
    `Is \`agentdb start\` or \`agentdb worker\` running for prefix ${prefix}?\n`
  );
}

/** Ctrl-C: the call is not withdrawn, so say where it stays and how to get its outcome later. */
export function interruptedNote(callId: string, caller: { workspace: string; agent: string }, last: PendingAnswer | AwaitingAnswer | undefined): string {
  const later = `its outcome: agentdb result ${callId} --workspace ${caller.workspace} --agent ${caller.agent} --wait`;
  if (last?.status === 'awaiting_approval') {
    return (
      `agentdb call: stopped waiting. Call ${callId} stays parked for approval ${last.approval.id} until a person decides ` +
      `or it expires at ${last.approval.expiresAt}; ${later}\n`
    );
  }
  return `agentdb call: stopped waiting. Call ${callId} is not withdrawn: it runs when a worker takes it; ${later}\n`;
}
