import type { CallAnswer, AgentDbClient } from './client.ts';
import { callerOf, callInputFor, type KeyedCall, type Principal } from '../registry/principal.ts';

/** How long a request may wait: `wait` false answers at once; true waits up to `maxWaitMs`. */
export interface KeyedWait {
  wait: boolean;
  maxWaitMs: number;
}

/**
 * Tool calls made with a bearer key (HTTP `/v1/calls`, MCP): the key's principal becomes the
 * caller, so the call key, idempotency, approvals and results are the same ones the client
 * library uses, and only the key's own calls can be looked up. A request never waits longer
 * than `maxWaitMs`; past it, it answers where the call stands (queued, running, awaiting
 * approval) and the caller asks again by call id.
 */
export class KeyedCalls {
  constructor(private readonly client: AgentDbClient) {}

  /** Enqueues `call` as `principal` and answers per `opts`. */
  async call(principal: Principal, call: KeyedCall, opts: KeyedWait): Promise<CallAnswer> {
    const first = await this.client.call(callInputFor(principal, call), { wait: false });
    if (!opts.wait || !('status' in first)) return first;
    return this.result(principal, first.callId, opts);
  }

  /** The principal's own call `callId`: its envelope, or where it stands. */
  async result(principal: Principal, callId: string, opts: KeyedWait): Promise<CallAnswer> {
    const who = { workspace: principal.workspace, agent: callerOf(principal) };
    if (!opts.wait) return this.client.result(callId, who);
    // The abandoned wait is settled when the call ends (run, rejected or expired), so it is
    // bounded by the approval TTL.
    const finished = await bounded(this.client.result(callId, { ...who, wait: true }), opts.maxWaitMs);
    return finished ?? this.client.result(callId, who);
  }
}

function bounded<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve(undefined), ms).unref();
    promise.then(
      (v) => (clearTimeout(timer), resolve(v)),
      (e: unknown) => (clearTimeout(timer), reject(e)),
    );
  });
}
