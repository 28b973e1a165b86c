import { describe, expect, it } from 'vitest';
import { BatchOrder } from '../../src/cli/batch-order.ts';

/** A call the test answers by hand, recording when it started. */
function gate(log: string[], name: string) {
  let open!: () => void;
  const answered = new Promise<void>((r) => {
    open = r;
  });
  return {
    call: async () => {
      log.push(`start ${name}`);
      await answered;
      return name;
    },
    open,
  };
}
const tick = () => new Promise((r) => setImmediate(r));

describe('a --batch keeps the order of a workspace', () => {
  it('starts a write only after the calls before it answered, and a read only after the writes before it', async () => {
    const log: string[] = [];
    const order = new BatchOrder();
    const create = gate(log, 'create');
    const insert = gate(log, 'insert');
    const read1 = gate(log, 'read1');
    const read2 = gate(log, 'read2');
    const drop = gate(log, 'drop');
    const all = [
      order.run('acme', 'DATA_WRITE_SQL', create.call),
      order.run('acme', 'DATA_WRITE_SQL', insert.call),
      order.run('acme', 'DATA_QUERY_SQL', read1.call),
      order.run('acme', 'DATA_DESCRIBE_SCHEMA', read2.call),
      order.run('acme', 'DATA_DROP_TABLE', drop.call),
    ];
    await tick();
    expect(log).toEqual(['start create']);
    create.open();
    await tick();
    expect(log).toEqual(['start create', 'start insert']);
    insert.open();
    await tick();
    // Reads between two writes run together.
    expect(log).toEqual(['start create', 'start insert', 'start read1', 'start read2']);
    read2.open();
    await tick();
    expect(log).not.toContain('start drop');
    read1.open();
    await tick();
    expect(log.at(-1)).toBe('start drop');
    drop.open();
    expect(await Promise.all(all)).toEqual(['create', 'insert', 'read1', 'read2', 'drop']);
  });

  it('lets a failed call open the way, and never holds one workspace up for another', async () => {
    const log: string[] = [];
    const order = new BatchOrder();
    const slow = gate(log, 'slow');
    const failed = order.run('acme', 'DATA_WRITE_SQL', async () => {
      throw new Error('refused');
    });
    const held = order.run('beta', 'DATA_WRITE_SQL', slow.call);
    const next = order.run('acme', 'DATA_WRITE_SQL', async () => 'next');
    const other = order.run('gamma', 'DATA_QUERY_SQL', async () => 'other');
    await expect(failed).rejects.toThrow('refused');
    expect(await next).toBe('next');
    expect(await other).toBe('other');
    slow.open();
    expect(await held).toBe('slow');
  });
});
