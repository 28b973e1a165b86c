import { describe, expect, it } from 'vitest';
import type { BackupReport } from '../../src/history/backup.ts';
import type { BackupProgress } from '../../src/shards/ops/backup-op.ts';
import { ShardProgress } from '../../src/shards/backups.ts';

const report = (database: string, unchanged = true): BackupReport => ({ database, files: 0, bytes: 0, unchanged });

describe("a backup run's progress, per shard", () => {
  it('tells of each database once: those whose event was missed from the outcome, at their place in the shard', () => {
    const heard: BackupProgress[] = [];
    const progress = new ShardProgress(3, (p) => heard.push(p));
    const [a, b, c] = [report('acme/a'), report('acme/b', false), report('acme/c')];
    progress.heard({ shard: 3, done: 2, total: 3, report: b });
    progress.heard({ shard: 3, done: 2, total: 3, report: b });
    progress.end([a, b, c]);
    // An event read after the outcome (the op had ended first) tells nothing more.
    progress.heard({ shard: 3, done: 3, total: 3, report: c });
    expect(heard).toEqual([
      { shard: 3, done: 2, total: 3, report: b },
      { shard: 3, done: 1, total: 3, report: a },
      { shard: 3, done: 3, total: 3, report: c },
    ]);
  });

  it('tells nothing of a shard whose op failed (no databases in its outcome)', () => {
    const heard: BackupProgress[] = [];
    new ShardProgress(0, (p) => heard.push(p)).end([]);
    expect(heard).toEqual([]);
  });
});
