import { describe, expect, it } from 'vitest';
import { shownUrl } from '../../src/redis/connection.ts';

// A Redis URL goes into messages (`agentdb mcp --stdio` refusals, "does not answer"): no password
// in any form ioredis accepts may be shown.
describe('shownUrl', () => {
  it('hides the password of the userinfo', () => {
    expect(shownUrl('redis://user:s3cret@h:6379/0')).toBe('redis://user:***@h:6379/0');
  });
  it('hides a password given as a query option, which ioredis authenticates with too', () => {
    expect(shownUrl('redis://127.0.0.1:6379/0?password=hunter2')).not.toContain('hunter2');
    expect(shownUrl('rediss://h/0?db=1&password=hunter2')).toContain('db=1');
  });
  it('shows nothing of a URL it cannot parse', () => {
    expect(shownUrl('redis://:s3cret@[::1')).not.toContain('s3cret');
  });
});
