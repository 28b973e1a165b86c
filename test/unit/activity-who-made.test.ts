import { describe, expect, it } from 'vitest';
import { whoMade } from '../../src/history/activity-view.ts';

// `agentdb activity` showed `agent:scout` and `member:ada` for calls but `acme/@ada` for ada's restore.
describe('whoMade', () => {
  it("shows a member's restore as member:<name>, like the member's own writes; other forms as they are", () => {
    expect(whoMade('acme/@ada')).toBe('member:ada');
    expect(whoMade('member:ada')).toBe('member:ada');
    expect(whoMade('agent:scout')).toBe('agent:scout');
    expect(whoMade('operator:root')).toBe('operator:root');
    expect(whoMade(undefined)).toBeUndefined();
  });
});
