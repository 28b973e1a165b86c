import { describe, expect, it } from 'vitest';
import { ERRORS, type ErrorCode, refusesTheRequest } from '../../src/errors.ts';

// Which refusals are the request's rather than the tool's (answered at once, nothing kept: no
// 200 envelope on /v1/calls, no MCP task) is the registry's rule: /v1/calls and /mcp read it there
// (review, session 29; one rule for both since session 31, H6).
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
