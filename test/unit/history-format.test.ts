import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { checkFrame, frameBytes, parseWalHeader, walChecksum, WAL_HEADER_BYTES } from '../../src/history/wal-format.ts';
import { scanBuffer } from '../../src/history/scan-buffer.ts';
import { wasmFrameBuffer } from '../../src/history/wal-sum-wasm.ts';
import { parseMoment } from '../../src/shards/history-client.ts';

/** The WAL SQLite writes for a table `t(x)` and the inserts `write` makes, in WAL mode with no checkpoint. */
function walWritten(write: (insert: Database.Statement) => void): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentdb-wal-'));
  try {
    const file = path.join(dir, 'w.sqlite');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('wal_autocheckpoint = 0');
    db.exec('CREATE TABLE t(x)');
    write(db.prepare('INSERT INTO t VALUES (?)'));
    const wal = fs.readFileSync(`${file}-wal`);
    db.close();
    return wal;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('the WAL format', () => {
  it('reads a WAL SQLite wrote: its header checks, and every frame chains to the one before', () => {
    const wal = walWritten((insert) => {
      for (let i = 0; i < 5; i++) insert.run('v'.repeat(3000));
    });
    const hdr = parseWalHeader(wal)!;
    expect(hdr).toMatchObject({ pageSize: 4096 });
    let c: [number, number] = [hdr.c1, hdr.c2];
    let frames = 0;
    let commits = 0;
    for (let at = WAL_HEADER_BYTES; at + frameBytes(hdr.pageSize) <= wal.length; at += frameBytes(hdr.pageSize)) {
      const ok = checkFrame(hdr, wal, at, c[0], c[1]);
      expect(ok, `frame ${frames + 1}`).toBeDefined();
      c = ok!.c;
      frames++;
      if (ok!.frame.commit > 0) commits++;
    }
    expect(commits).toBe(6);
    // One flipped byte breaks the chain at that frame.
    const broken = Buffer.from(wal);
    broken[WAL_HEADER_BYTES + 24 + 10]! ^= 0xff;
    expect(checkFrame(hdr, broken, WAL_HEADER_BYTES, hdr.c1, hdr.c2)).toBeUndefined();
    // A header with a wrong checksum is no header.
    const badHeader = Buffer.from(wal.subarray(0, WAL_HEADER_BYTES));
    badHeader[20]! ^= 1;
    expect(parseWalHeader(badHeader)).toBeUndefined();
  });

  it('checks frames read into a scan buffer (summed in WebAssembly) exactly as anywhere else, salts and sums', () => {
    const wal = walWritten((insert) => {
      for (let i = 0; i < 40; i++) insert.run(randomBytes(100 + i * 700));
    });
    const hdr = parseWalHeader(wal)!;
    const fb = frameBytes(hdr.pageSize);
    const frames = Math.floor((wal.length - WAL_HEADER_BYTES) / fb);
    const scan = scanBuffer(frames * fb);
    // A restore's frames are in the module's memory: this is the sum it runs.
    expect(wasmFrameBuffer(0)?.buffer).toBe(scan.buffer);
    wal.copy(scan, 0, WAL_HEADER_BYTES, WAL_HEADER_BYTES + frames * fb);
    let plain: [number, number] = [hdr.c1, hdr.c2];
    let wasm: [number, number] = [hdr.c1, hdr.c2];
    for (let n = 0; n < frames; n++) {
      const a = checkFrame(hdr, wal, WAL_HEADER_BYTES + n * fb, plain[0], plain[1]);
      const b = checkFrame(hdr, scan, n * fb, wasm[0], wasm[1]);
      expect(b, `frame ${n + 1}`).toEqual(a);
      expect(b).toBeDefined();
      plain = a!.c;
      wasm = b!.c;
    }
    // A flipped byte in a header word summed, in the page's first and last word, breaks it there.
    for (const offset of [3, 24, fb - 1]) {
      scan[5 * fb + offset]! ^= 0x10;
      expect(checkFrame(hdr, scan, 5 * fb, ...checkFrame(hdr, scan, 4 * fb, ...chainTo(4))!.c), `byte ${offset}`).toBeUndefined();
      scan[5 * fb + offset]! ^= 0x10;
    }
    function chainTo(n: number): [number, number] {
      let c: [number, number] = [hdr.c1, hdr.c2];
      for (let i = 0; i < n; i++) c = checkFrame(hdr, wal, WAL_HEADER_BYTES + i * fb, c[0], c[1])!.c;
      return c;
    }
  });

  it('sums the same whether the buffer is aligned for a word view or not', () => {
    const data = Buffer.alloc(4104);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 0xff;
    const aligned = walChecksum(false, data, 0, 4096, 7, 9);
    const shifted = Buffer.alloc(4100);
    data.copy(shifted, 4, 0, 4096);
    expect(walChecksum(false, shifted, 4, 4100, 7, 9)).toEqual(aligned);
    const odd = Buffer.concat([Buffer.alloc(1), data]).subarray(1);
    expect(walChecksum(false, odd, 0, 4096, 7, 9)).toEqual(aligned);
  });
});

describe('restore times', () => {
  it('take unix seconds (with a fraction) and ISO times, UTC when no zone is given', () => {
    expect(parseMoment(1764554340)).toBe(1764554340000);
    expect(parseMoment('1764554340.25')).toBe(1764554340250);
    expect(parseMoment('2026-12-01T02:00:00Z')).toBe(Date.UTC(2026, 11, 1, 2));
    expect(parseMoment('2026-12-01T02:00:00')).toBe(Date.UTC(2026, 11, 1, 2));
    expect(parseMoment('2026-12-01T03:00:00+01:00')).toBe(Date.UTC(2026, 11, 1, 2));
  });

  it('refuse anything else with INVALID_ARGUMENTS', () => {
    for (const bad of ['yesterday', '', '12/01/2026', 'NaN', -5, Number.NaN]) {
      expect(() => parseMoment(bad as string | number), String(bad)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENTS' }));
    }
  });
});
