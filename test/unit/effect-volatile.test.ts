import { describe, expect, it } from 'vitest';
import type { EffectValue } from '../../src/contracts/effect.ts';
import { clockForm, instant, recordingWindow } from '../../src/sqlite/effect-clock.ts';
import { namedColumns, volatileAssignments, volatileDefault } from '../../src/sqlite/effect-volatile.ts';

describe('what an effect digest may leave out', () => {
  it('takes a column set to only literals, the clock and randomness, everywhere it is set', () => {
    const updated = (cols: string[]) => ({ inserted: new Set(), updated: new Set(cols) });
    expect(
      volatileAssignments(
        "UPDATE t SET a = random(), b = CASE WHEN random() > 0 THEN 'nice' ELSE 'evil' END, c = (SELECT 1), d = lower(hex(randomblob(16))), e = ?, f = CURRENT_TIMESTAMP WHERE id = 1",
      ),
    ).toEqual(updated(['a', 'd', 'f']));
    expect(volatileAssignments("UPDATE t SET (a, b) = (random(), random()), c = datetime('now', '+1 day') WHERE id = 1")).toEqual(updated(['c']));
    // Arithmetic on the clock can make a step (0 before a time, 1 after): bound.
    expect(volatileAssignments('UPDATE t SET a = (unixepoch() - 1800000000 + 1000000000) / 1000000000, b = random() + 1')).toEqual(updated([]));
    expect(volatileAssignments("INSERT INTO t (id, v, at, n) VALUES (lower(hex(randomblob(16))), ?, CURRENT_TIMESTAMP, 1), (random(), 'x', v, 2)")).toEqual({
      inserted: new Set(['id']),
      updated: new Set(),
    });
    expect(volatileAssignments('INSERT INTO t (k, n) SELECT random(), random() FROM s')).toEqual(updated([]));
    // Literals alone are a constant: bound (the column's affinity decides what is stored).
    expect(volatileAssignments("UPDATE t SET a = 'x', b = lower('Y'), c = 1, d = datetime('2020-01-01'), e = date('NOW')")).toEqual(updated(['e']));
  });

  it('keeps what an upsert sets on conflict apart from what its rows insert (session 35, R9)', () => {
    // The inserted n is a parameter; the updated n is random.
    expect(volatileAssignments('INSERT INTO t (k, n) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET n = random() WHERE n > 0')).toEqual({
      inserted: new Set(),
      updated: new Set(['n']),
    });
    expect(volatileAssignments('INSERT INTO t (k, n) VALUES (random(), random()) ON CONFLICT (k) DO UPDATE SET n = excluded.n RETURNING k')).toEqual({
      inserted: new Set(['k', 'n']),
      updated: new Set(),
    });
    // Without a column list, or with n absent from it, nothing says what an inserted row's n is.
    for (const sql of [
      'INSERT INTO t VALUES (1, (SELECT v FROM s)) ON CONFLICT (k) DO UPDATE SET n = random()',
      'INSERT INTO t (k) VALUES (1) ON CONFLICT DO UPDATE SET n = random()',
    ])
      expect(volatileAssignments(sql).inserted.has('n'), sql).toBe(false);
    // VALUES that are not the whole source: another arm, or a subquery.
    for (const sql of [
      'INSERT INTO t (n) VALUES (random()) UNION ALL SELECT v FROM s',
      'INSERT INTO t (n) VALUES (random()) ORDER BY 1',
      'INSERT INTO t (n) SELECT * FROM (VALUES (random()))',
    ])
      expect(volatileAssignments(sql).inserted, sql).toEqual(new Set());
  });

  it('knows a volatile DEFAULT and the columns a statement names', () => {
    for (const d of ['CURRENT_TIMESTAMP', "datetime('now')", '(randomblob(8))', "strftime('%s', 'now')", 'unixepoch()']) expect(volatileDefault(d)).toBe(true);
    for (const d of [null, "'unknown'", '0', "'now is'", "(CASE WHEN unixepoch() < 1800000000 THEN 'nice' ELSE 'evil' END)", '(unixepoch() / 1800000000)'])
      expect(volatileDefault(d)).toBe(false);
    expect(namedColumns('INSERT INTO t VALUES (1, NULL), (NULL, NULL)')).toMatchObject({ all: true, nullAt: new Set([1]) });
    expect(namedColumns('INSERT INTO t SELECT * FROM s')).toMatchObject({ all: true, nullAt: new Set() });
    // A NULL key in VALUES that are not the whole source is no key SQLite assigns: the other arm gives one.
    expect(namedColumns('INSERT INTO t VALUES (NULL, 1) UNION ALL SELECT k, v FROM s')).toMatchObject({ all: true, nullAt: new Set() });
    expect(namedColumns('INSERT INTO t SELECT * FROM (VALUES (NULL, 1)) UNION ALL SELECT k, v FROM s')).toMatchObject({ all: true, nullAt: new Set() });
    expect(namedColumns('INSERT INTO t VALUES (NULL, 1) ON CONFLICT DO NOTHING')).toMatchObject({ all: true, nullAt: new Set([0]) });
    expect(namedColumns('INSERT INTO t DEFAULT VALUES')).toMatchObject({ all: false });
    const listed = namedColumns('INSERT INTO main.t AS x ("A") VALUES (1)');
    expect(listed.all).toBe(false);
    expect(listed.spelled.has('a')).toBe(true);
  });

  it('reads a time of the recording clock in the forms SQLite writes it, and nothing else', () => {
    const now = Date.now();
    const w = recordingWindow(now, now + 5);
    const iso = new Date(now).toISOString();
    const raw = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : v);
    const forms: [unknown, string][] = [
      [iso, 'text:9999-99-99T99:99:99.999Z'],
      [iso.slice(0, 19).replace('T', ' '), 'text:9999-99-99 99:99:99'],
      [iso.slice(0, 10), 'text:9999-99-99'],
      [iso.slice(11, 19), 'text:99:99:99'],
      [Math.floor(now / 1000), 'integer:s'],
      [now, 'integer:ms'],
      [now / 1000, 'real:s'],
      [now / 86400000 + 2440587.5, 'real:jd'],
    ];
    for (const [v, form] of forms) expect(clockForm(v as EffectValue, raw(v), w), String(v)).toBe(form);
    // A whole REAL of unix seconds keeps its type in its form.
    expect(clockForm(Math.floor(now / 1000), Math.floor(now / 1000), w)).toBe('real:s');
    const hourAgo = new Date(now - 3600000).toISOString();
    for (const v of [hourAgo, hourAgo.slice(0, 19).replace('T', ' '), hourAgo.slice(11, 19), Math.floor(now / 1000) - 3600, 'nice', 5, null, { $blob: 'AA==' }])
      expect(clockForm(v as EffectValue, raw(v), w), String(v)).toBeUndefined();
  });

  it('reads, at the instant a run read the clock, only that instant (session 36, R10)', () => {
    const ms = Date.parse('2026-12-07T15:50:01.234Z');
    const at = instant(ms / 86400000 + 2440587.5)!;
    expect(at).toEqual({ start: ms, end: ms });
    for (const v of ['2026-12-07 15:50:01', '2026-12-07T15:50:01.234Z', '2026-12-07 15:50:01.2', '2026-12-07', '15:50:01', '2026-12-07 15:50'])
      expect(clockForm(v, v, at), v).toBeDefined();
    for (const v of [ms, ms - 1, ms + 1, Math.floor(ms / 1000)]) expect(clockForm(v, BigInt(v), at), String(v)).toBeDefined();
    expect(clockForm(ms / 1000, ms / 1000, at)).toBe('real:s');
    for (const v of ['2026-12-07 15:50:00', '2026-12-07 15:50:02', '2026-12-07 15:50:01.235', '15:50:02', '2026-12-06'])
      expect(clockForm(v, v, at), v).toBeUndefined();
    for (const v of [ms - 2, ms + 2, ms - 1000, Math.floor(ms / 1000) + 1]) expect(clockForm(v, BigInt(v), at), String(v)).toBeUndefined();
    expect(clockForm(ms / 1000 + 0.002, ms / 1000 + 0.002, at)).toBeUndefined();
  });
});
