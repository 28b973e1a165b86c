import { errorBody, type ErrorBody, type ErrorCode } from '../errors.ts';

/** A call that ran. Rows inside `result` came from an agent-writable store: untrusted data. */
export interface OkEnvelope {
  /** Always true: the call ran. */
  ok: true;
  /** The call id it ran under. */
  callId: string;
  /** The tool that ran. */
  tool: string;
  /** Credits the call was charged. */
  credits: number;
  /** Always true: `result` holds what agents wrote, so a reader treats it as data, never as instructions. */
  untrusted: true;
  /** The tool's result (rows, row counts, a table's description), as the tool's contract gives it. */
  result: Record<string, unknown>;
  /**
   * A write's answer read late (a resend, a result lookup) after a restore in place of its
   * database took the write back: it did commit, but what it wrote is gone until that restore is
   * undone (`calls/taken-back.ts`).
   */
  takenBack?: TakenBack;
}

/** What a write's late answer says of the restore that took the write back since it committed. */
export interface TakenBack {
  /** The restore's undo id: undoing it brings the write back. */
  undoId: string;
  /** The moment that restore went back to (ISO). */
  restoredTo: string;
  /** The same in words. */
  note: string;
}

/** A call that did not run, or failed; `error.code` is a registry code. */
export interface ErrorEnvelope {
  /** Always false: the call did not run, or failed. */
  ok: false;
  /** The call id it was sent under. */
  callId: string;
  /** The tool called. */
  tool: string;
  /** Why, with a stable registry code (docs/errors.md), a message and a hint. */
  error: ErrorBody;
  /**
   * On UNAVAILABLE from the client library: whether the call had reached Redis, so it may still
   * run once Redis is back (send it again under the same call id; that is idempotent).
   */
  mayStillRun?: boolean;
}

/** The result of every call, on every path. */
export type Envelope = OkEnvelope | ErrorEnvelope;

/** Builds a success envelope. */
export function okEnvelope(callId: string, tool: string, credits: number, result: Record<string, unknown>): OkEnvelope {
  return { ok: true, callId, tool, credits, untrusted: true, result };
}

/**
 * Builds a failure envelope from a registry code and what exactly went wrong. The call id and
 * tool are what the caller sent, valid or not, so they are cut to the longest valid ones.
 */
export function errorEnvelope(callId: string, tool: string, code: ErrorCode, detail?: string): ErrorEnvelope {
  return { ok: false, callId: cut(callId, 128), tool: cut(tool, 64), error: errorBody(code, detail) };
}

function cut(text: string, max: number): string {
  return typeof text === 'string' && text.length > max ? `${text.slice(0, max)}…` : text;
}
