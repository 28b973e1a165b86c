import { z } from 'zod';
import { AgentDbError } from '../errors.ts';

/**
 * What a read's `as_of` asks for, parsed: a moment (epoch ms: every commit captured at or before
 * it), or a call id (the state just before that call's write committed).
 */
export type AsOf = { at: number } | { callId: string };

/** The most an `as_of` may take: an ISO time, unix seconds or a call id (128 characters) all fit. */
const MAX_AS_OF_CHARS = 128;

/** The `as_of` argument of DATA_QUERY_SQL, DATA_DESCRIBE_SCHEMA and db_query. */
export const asOfField = z
  .string()
  .min(1, 'as_of must not be empty')
  .max(MAX_AS_OF_CHARS, `as_of must be at most ${MAX_AS_OF_CHARS} characters`)
  .refine((s) => parsedAsOf(s) !== undefined, 'as_of must be an ISO time (2026-12-01T02:00:00Z), unix seconds, or the call id of a write to this database')
  .describe(
    'Read the database as it was, read-only, from its history: an ISO time (2026-12-01T02:00:00Z; UTC when no zone), unix seconds, or the call id of a write to this database (just before it committed). Absent: now.',
  );

/**
 * Reads an `as_of` as a moment or a call id (a call id is never a plain number nor starts like
 * a date: see `callId`). @throws AgentDbError INVALID_ARGUMENTS for anything else.
 */
export function parseAsOf(text: string): AsOf {
  const parsed = parsedAsOf(text);
  if (!parsed) throw new AgentDbError('INVALID_ARGUMENTS', `as_of ${JSON.stringify(text)} is neither an ISO time, unix seconds, nor a call id`);
  return parsed;
}

function parsedAsOf(raw: string): AsOf | undefined {
  const text = raw.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return moment(Math.round(Number(text) * 1000));
  if (/^\d{4}-\d\d-\d\d/.test(text)) {
    // As restores read times: one without a zone is UTC, its time after a T or a space alike.
    const zoned = /[zZ]|[+-]\d\d:?\d\d$/.test(text) || /^\d{4}-\d\d-\d\d$/.test(text) ? text : `${text}Z`;
    return moment(Date.parse(zoned));
  }
  return /^[A-Za-z0-9_-]{1,128}$/.test(text) ? { callId: text } : undefined;
}

/** The largest moment a JS Date holds; past it a time is nonsense. */
const MAX_DATE_MS = 8.64e15;

function moment(ms: number): AsOf | undefined {
  return Number.isFinite(ms) && ms >= 0 && ms <= MAX_DATE_MS ? { at: ms } : undefined;
}
