/**
 * The values an effect leaves out of its digest are made as the row is written: the rowid SQLite
 * assigns, a volatile DEFAULT, the clock or randomness. The person was shown the preview's, with
 * nothing saying the run may write others: an approved insert showed `id: 3`, another insert
 * committed meanwhile, and the row got 4 (R10/R11's leftover). Each such value is now named in the
 * row's `madeAtRun`, and marked on the web card and in `agentdb approvals show` (session 37, R12).
 */
import { describe, expect, it } from 'vitest';
import type { Approval } from '../../src/approvals/approval.ts';
import { effectText } from '../../src/cli/approvals-table.ts';
import { effectView } from '../../src/http/web/effect-view.ts';
import { previewEffect } from '../../src/sqlite/sqlite-effect-preview.ts';
import { EFFECT_TEST_FX as FX, EFFECT_TEST_LIMITS as LIMITS, effectDatabase } from '../helpers/effect-database.ts';

describe('an effect names the values made when it runs', () => {
  const t = effectDatabase(
    'agentdb-effect-made-at-run-',
    `CREATE TABLE leads (id INTEGER PRIMARY KEY, name TEXT, at TEXT DEFAULT CURRENT_TIMESTAMP);
     CREATE TABLE notes (body TEXT);
     INSERT INTO leads (id, name) VALUES (1, 'ada'), (2, 'bob');`,
  );

  it('marks an assigned rowid and a volatile DEFAULT, on the effect, the card and the CLI', () => {
    const insert = "INSERT INTO leads (name) VALUES ('cy')";
    const fx = previewEffect(t.db, insert, [], LIMITS, FX);
    expect(fx.rows[0]).toMatchObject({ op: 'insert', key: { rowid: 3 }, madeAtRun: ['rowid', 'id', 'at'] });

    const approval = { id: 'ap_x', state: 'pending', tool: 'DATA_WRITE_SQL', effect: fx } as unknown as Approval;
    expect(effectText(approval)).toContain('insert leads {"rowid":3} (made when it runs, may differ: rowid, id, at)');
    const card = String(effectView(approval));
    expect(card).toMatch(/<td class="added">3 <small class="made muted"[^>]*>\(when it runs\)<\/small><\/td>/);
    expect(card).toMatch(/<td class="added">cy<\/td>/);

    // Why it is marked: an insert approved meanwhile takes the id shown, and the run assigns another.
    t.meanwhile("INSERT INTO leads (name) VALUES ('dee')");
    expect(t.approvedRun(insert, fx.digest)).toMatchObject({ changes: 1 });
    expect(t.db.prepare("SELECT id FROM leads WHERE name = 'cy'").pluck().get()).toBe(4);
  });

  it('marks a hidden rowid, and nothing where every value shown is bound', () => {
    const note = previewEffect(t.db, "INSERT INTO notes (body) VALUES ('x')", [], LIMITS, FX);
    expect(note.rows[0]!.madeAtRun).toEqual(['rowid']);
    const noteCard = String(effectView({ id: 'ap_n', state: 'pending', tool: 'DATA_WRITE_SQL', effect: note } as unknown as Approval));
    expect(noteCard).toContain('<th>rowid</th>');
    expect(noteCard).toMatch(/<td class="added">1 <small class="made muted"[^>]*>\(when it runs\)<\/small><\/td><td class="added">x<\/td>/);
    const named = previewEffect(t.db, "INSERT INTO leads (id, name, at) VALUES (9, 'x', 'then')", [], LIMITS, FX);
    expect(named.rows[0]!.madeAtRun).toBeUndefined();
    const update = previewEffect(t.db, "UPDATE leads SET name = 'z' WHERE id = 1", [], LIMITS, FX);
    expect(update.rows[0]!.madeAtRun).toBeUndefined();
    const approval = { id: 'ap_y', state: 'pending', tool: 'DATA_WRITE_SQL', effect: update } as unknown as Approval;
    expect(effectText(approval)).not.toContain('made when it runs');
    expect(String(effectView(approval))).not.toContain('when it runs');
    const stamped = previewEffect(t.db, 'UPDATE leads SET at = CURRENT_TIMESTAMP WHERE id = 2', [], LIMITS, FX);
    expect(stamped.rows[0]!.madeAtRun).toEqual(['at']);
  });

  it('marks the rows a CREATE TABLE … AS SELECT makes', () => {
    const fx = previewEffect(t.db, "CREATE TABLE copy AS SELECT name, datetime('now') AS seen FROM leads", [], LIMITS, FX);
    expect(fx.rows[0]!.madeAtRun).toEqual(['rowid', 'seen']);
  });
});
