import { describe, expect, it } from 'vitest';
import { ERRORS, type ErrorCode, keepsNothingFor, refusesTheRequest } from '../../src/errors.ts';

// Which refusals are the request's rather than the tool's, and which keep nothing for their call,
// are the registry's rules: /v1/calls and /mcp read them there (review, session 29).
const codes = Object.keys(ERRORS) as ErrorCode[];

describe('refusals of the request, not the tool', () => {
  it('are a call id naming another call, Redis away, a rate limit, and any refusal that says when to send again', () => {
    expect(codes.filter((code) => refusesTheRequest({ code }))).toEqual(['IDEMPOTENCY_CONFLICT', 'RATE_LIMITED', 'UNAVAILABLE']);
    // The Redis budget's QUOTA_EXCEEDED says when (a 429); the disk quota's is a call's outcome (a 200 envelope).
    expect(refusesTheRequest({ code: 'QUOTA_EXCEEDED', retryAfter: 30 })).toBe(true);
    expect(refusesTheRequest({ code: 'QUOTA_EXCEEDED' })).toBe(false);
    expect(refusesTheRequest({ code: 'SQL_ERROR' })).toBe(false);
  });

  it('each answer with an error status over HTTP', () => {
    for (const code of codes.filter((c) => refusesTheRequest({ code: c }))) expect(ERRORS[code].status, code).toBeGreaterThanOrEqual(400);
  });
});

describe('refusals that keep nothing for their call (no MCP task)', () => {
  it('are those that may come before the call is taken: a bound, or Redis away', () => {
    expect(codes.filter((code) => keepsNothingFor(code))).toEqual(['QUOTA_EXCEEDED', 'RATE_LIMITED', 'UNAVAILABLE']);
  });

  it('is false for anything not a registry code', () => {
    expect(keepsNothingFor('RATE_LIMITED ')).toBe(false);
    expect(keepsNothingFor(undefined)).toBe(false);
  });
});
