import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { syncBehind } from '../../src/history/sync-behind.ts';

// A restore flushes the file it copies on another thread as it goes (the fsync after then finds
// little left). Whatever the thread meets, stopping it returns, and the file is untouched by it.
describe('flushing a file on another thread while it is written', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-sync-behind-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('leaves the bytes written, and stops when asked, more than once, for file after file', () => {
    for (let round = 0; round < 3; round++) {
      const file = path.join(dir, `copy-${round}`);
      fs.writeFileSync(file, '');
      const flushing = syncBehind(file);
      const chunk = Buffer.alloc(1024 * 1024, round + 1);
      const fd = fs.openSync(file, 'r+');
      for (let i = 0; i < 8; i++) fs.writeSync(fd, chunk, 0, chunk.length, i * chunk.length);
      fs.closeSync(fd);
      flushing.stop();
      flushing.stop();
      const back = fs.readFileSync(file);
      expect(back.length).toBe(8 * 1024 * 1024);
      expect(back.every((b) => b === round + 1)).toBe(true);
    }
  });

  it('stops at once for a file that is not there', () => {
    const flushing = syncBehind(path.join(dir, 'missing'));
    flushing.stop();
    expect(fs.existsSync(path.join(dir, 'missing'))).toBe(false);
  });
});
