import { describe, expect, it } from 'vitest';
import { blobRestoredText, restoredText } from '../../src/cli/restore-text.ts';
import type { RestoreResult } from '../../src/shards/history-client.ts';
import type { BlobRestoreResult } from '../../src/history/blob-restore.ts';

const result = (extra: Partial<BlobRestoreResult> = {}): BlobRestoreResult => ({
  database: 'acme/scout',
  restoredTo: '2026-12-06T07:06:36.195Z',
  snapshot: { id: 'g0000000002', at: '2026-12-06T07:06:36.195Z' },
  frames: 0,
  commits: 0,
  downloaded: 32768,
  dryRun: false,
  ...extra,
});

describe('blobRestoredText: what `agentdb restore DB --from-blob` prints for a person', () => {
  it('dates a restore built from a snapshot alone by the snapshot, not by a commit', () => {
    expect(blobRestoredText(result())).toBe(
      'restored acme/scout from its backup in the blob store as of 2026-12-06T07:06:36.195Z (when its snapshot was taken)\n' +
        'built from snapshot g0000000002 (taken 2026-12-06T07:06:36.195Z) alone; 32768 bytes downloaded and verified\n',
    );
  });

  it('names the last commit kept when commits after the snapshot were applied', () => {
    const text = blobRestoredText(result({ restoredTo: '2026-12-06T07:09:00.000Z', commits: 2, frames: 5, dryRun: true, downloaded: 0 }));
    expect(text).toBe(
      'dry run, nothing changed: acme/scout would be restored from its backup in the blob store as of 2026-12-06T07:09:00.000Z (the last commit kept)\n' +
        'built from snapshot g0000000002 (taken 2026-12-06T07:06:36.195Z) and the 2 commits after it\n',
    );
  });
});

describe('restoredText: what `agentdb restore` prints after a restore or an undo', () => {
  const done = (extra: Partial<RestoreResult> = {}): RestoreResult => ({
    database: 'acme/scout',
    restoredTo: '2026-12-06T07:06:36.195Z',
    dryRun: false,
    snapshot: { id: 'g0000000002', at: '2026-12-06T07:06:36.195Z' },
    frames: 0,
    commits: 0,
    restoredBytes: 4096,
    undoId: 'u1',
    ...extra,
  });

  // Review N6 (session 30): an undo goes back to the snapshot taken before the restore it undoes,
  // and said "(the last commit kept)" of that snapshot's time; then (N8, session 32) "as of" a
  // snapshot hours older than the restore, which read as hours lost: nothing was written since it.
  it('dates an undo built from a snapshot alone by the snapshot, as the state nothing changed since', () => {
    expect(restoredText(done(), { undo: 'u0' })).toBe(
      'undid restore u0: acme/scout is back as it was before that restore, unchanged since its snapshot of 2026-12-06T07:06:36.195Z\n' +
        'undo id u1: agentdb restore acme/scout --undo u1 puts back what was there before\n',
    );
  });

  it('names the last commit kept when commits after the snapshot were applied', () => {
    expect(restoredText(done({ commits: 3, frames: 7 }), {})).toMatch(/^restored acme\/scout as of \S+ \(the last commit kept\)\n/);
  });
});
