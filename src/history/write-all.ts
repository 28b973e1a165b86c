import fs from 'node:fs';

/**
 * Writes `bytes` of `buf` at `pos`, all of them or an error: `fs.writeSync` returns what one
 * write(2) took, which on a nearly full disk is less than asked, silently. A file written so
 * and then put in place (a delta restore's WAL linked in with half its frames, an undo point's
 * JSON cut short) looked whole to whoever read it next (session 33, F10).
 * @throws Error with code ENOSPC (answered STORAGE_FULL) when a write takes nothing.
 */
export function writeAll(fd: number, buf: Uint8Array, bytes: number = buf.length, pos = 0): void {
  let done = 0;
  while (done < bytes) {
    const n = fs.writeSync(fd, buf, done, bytes - done, pos + done);
    if (n <= 0) throw Object.assign(new Error(`wrote ${done} of ${bytes} bytes (disk full?)`), { code: 'ENOSPC' });
    done += n;
  }
}
