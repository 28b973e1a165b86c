import { describe, expect, it } from 'vitest';
import { chargedActivityRead, type ChargeMemberLookup } from '../../src/calls/activity-charge.ts';
import type { RateRefusal } from '../../src/calls/call-rate-limits.ts';

const ada = { workspace: 'acme', name: 'ada' };

/** A charge that records what it was asked and refuses once `refuseAt` charges were made. */
function charges(refuseAt = Infinity): { charge: ChargeMemberLookup; asked: (number | undefined)[] } {
  const asked: (number | undefined)[] = [];
  const refusal: RateRefusal = { of: 'workspace', calls: 1, windowS: 60, retryAfterS: 7 };
  return {
    asked,
    charge: async (workspace, member, points) => {
      expect([workspace, member]).toEqual(['acme', 'ada']);
      asked.push(points);
      return asked.length >= refuseAt ? refusal : undefined;
    },
  };
}

describe('chargedActivityRead: the one charge of an activity page (the API and the web page)', () => {
  it('charges a lookup, then a call (10 points) per 10,000 items the page read afresh', async () => {
    const { charge, asked } = charges();
    const out = await chargedActivityRead(charge, ada, async (onRead) => {
      onRead(25_000);
      return 'page';
    });
    expect(out).toEqual({ page: 'page' });
    expect(asked).toEqual([undefined, 25]);
  });

  it('charges only the lookup for a page that read under 1,000', async () => {
    const { charge, asked } = charges();
    await chargedActivityRead(charge, ada, async (onRead) => {
      onRead(999);
      return 'page';
    });
    expect(asked).toEqual([undefined]);
  });

  it('reads nothing once the lookup is refused, and answers the refusal', async () => {
    const { charge, asked } = charges(1);
    let read = false;
    const out = await chargedActivityRead(charge, ada, async () => {
      read = true;
      return 'page';
    });
    expect(out).toEqual({ limited: { of: 'workspace', calls: 1, windowS: 60, retryAfterS: 7 } });
    expect(read).toBe(false);
    expect(asked).toEqual([undefined]);
  });

  it('charges what a page refused for its size read, and lets the refusal through', async () => {
    const { charge, asked } = charges();
    const refused = chargedActivityRead(charge, ada, async (onRead) => {
      onRead(500_000);
      throw new Error('RESOURCE_LIMIT');
    });
    await expect(refused).rejects.toThrow('RESOURCE_LIMIT');
    expect(asked).toEqual([undefined, 500]);
  });

  it('counts nothing without a charge (a server without rate limits)', async () => {
    expect(await chargedActivityRead(undefined, ada, async () => 'page')).toEqual({ page: 'page' });
  });
});
