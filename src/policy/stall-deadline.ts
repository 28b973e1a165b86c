import type { Readable } from 'node:stream';

/**
 * DOWNLOAD_STALL_SECONDS' default: how long a download (a CSV export, an offloaded result) may
 * go without its reader taking anything before it is cut off. A person's slowest link takes a
 * piece ({@link PIECE_CHARS}) in seconds; a minute is far past that and far short of forever.
 */
export const DEFAULT_STALL_MS = 60_000;

/**
 * Characters of one piece a download is written in: a 2 MiB chunk written whole is taken by the
 * socket only once all of it has gone, so an honest reader at 10 KB/s would look stalled for
 * 200 s; 32 Ki characters (at most 128 KiB of UTF-8) go in seconds at that rate.
 */
export const PIECE_CHARS = 32 * 1024;

/** `text` in pieces of at most {@link PIECE_CHARS} characters, for {@link stallDeadline} to see a slow reader's progress. */
export function* pieces(text: string, chars = PIECE_CHARS): Generator<string> {
  if (text.length <= chars) {
    yield text;
    return;
  }
  let at = 0;
  while (at < text.length) {
    let end = Math.min(at + chars, text.length);
    // Never between the two halves of a surrogate pair: each piece is encoded alone.
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end += 1;
    yield text.slice(at, end);
    at = end;
  }
}

/**
 * Cuts off a download whose reader takes nothing for `ms`: `onStall` is called (once) when
 * `stream`, piped to the answer, has stayed paused that long. A pipe pauses its source only when
 * the socket will take no more (its reader is not reading), so a slow source (a shard busy with
 * the next chunk, a slow blob store) never counts; a reader taking anything resumes it.
 *
 * Without it a download whose reader took nothing held its slot (export-slots.ts,
 * download-slots.ts) and its chunks in memory for as long as the connection stayed: the fair
 * share gives slots back only between workspaces, so 64 workspaces (32 for downloads) each
 * holding one such download held every slot in the process (session 35, T15's leftover).
 * `onStall` must end the answer so that it cannot look whole (destroy the socket or fail the
 * stream): a cut-off download is never a shorter file.
 */
export function stallDeadline(stream: Readable, ms: number, onStall: () => void): void {
  let timer: NodeJS.Timeout | undefined;
  let done = false;
  const clear = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
  stream.on('pause', () => {
    if (done) return;
    clear();
    timer = setTimeout(() => {
      timer = undefined;
      done = true;
      onStall();
    }, ms);
    // A download never keeps a process up that is otherwise done.
    timer.unref();
  });
  stream.on('resume', clear);
  stream.once('close', () => {
    done = true;
    clear();
  });
}
