import { z } from 'zod';
import { agentName, workspaceName } from './names.ts';
import { agentSettings, type AgentSettingsInput } from './settings.ts';

/**
 * Call ids are BullMQ job ids, so they may not be plain integers or hold ':'; a runtime may
 * pass its own to make an enqueue idempotent.
 */
export const callId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,128}$/, 'callId must be 1 to 128 of A-Z, a-z, 0-9, _ and -')
  .refine((s) => !/^\d+$/.test(s), 'callId must not be a plain integer');

/**
 * MAX_CALL_BYTES' default: the most a call's arguments may take as JSON (UTF-8), params
 * included. Each param had no size limit of its own, and a 30 MB one was kept for a week.
 */
export const DEFAULT_MAX_CALL_BYTES = 1024 * 1024;

/**
 * The size of a call's arguments as JSON, in UTF-8 bytes, as they would be stored in Redis; or
 * undefined when they are not JSON at all (a BigInt, a cycle).
 */
export function argumentBytes(args: unknown): number | undefined {
  try {
    return Buffer.byteLength(JSON.stringify(args ?? {}) ?? '', 'utf8');
  } catch {
    return undefined;
  }
}

/** One tool call as an agent runtime enqueues it. */
export const callRequest = z.strictObject({
  callId: callId.optional(),
  workspace: workspaceName,
  agent: agentName,
  settings: agentSettings.prefault({}),
  tool: z.string().min(1).max(64),
  arguments: z.unknown().optional(),
});

/** What a caller passes to `client.call()`. */
export interface CallInput {
  callId?: string;
  workspace: string;
  agent: string;
  settings?: AgentSettingsInput;
  tool: string;
  arguments?: unknown;
}

/** A call after its envelope (not yet its arguments) has been validated. */
export type CallRequest = z.output<typeof callRequest>;

/** The data of a call's BullMQ job. */
export interface CallJobData {
  callId: string;
  workspace: string;
  agent: string;
  settings: CallRequest['settings'];
  tool: string;
  arguments: unknown;
  /** Epoch ms when the client enqueued it. */
  enqueuedAt: number;
}
