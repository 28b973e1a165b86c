import { describe, expect, it } from 'vitest';
import { safeNext } from '../../src/http/web/safe-next.ts';

describe('safeNext: where /sign-in?next= may send a member', () => {
  it.each([
    '//x',
    '/\\x',
    '/\t/x',
    '/\n/x',
    '/\r/x',
    '/%09/x',
    '/%0a/x',
    '/%5C/x',
    'https://x',
    'http://x/inbox',
    'javascript:alert(1)',
    'JavaScript:alert(1)',
    '/%2F%2Fx',
    '/%2f/x',
    // Dot segments resolve away and leave the encoded slashes at the front of the path.
    '/./%2F%2Fx',
    '/./%2f/x',
    '/a/../%2F%2Fx',
    '/%2e/%2F%2Fx',
    '\\\\x',
    ' /inbox',
    '',
    'inbox',
    42,
    undefined,
  ])('refuses %j and falls back to /inbox', (next) => {
    expect(safeNext(next)).toBe('/inbox');
  });

  it.each(['/inbox', '/data?db=agent%3Aa&table=t', '/history#top', '/inbox?x=%2F'])('keeps the same-site path %j', (next) => {
    expect(safeNext(next)).toBe(next);
  });
});
