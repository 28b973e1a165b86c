// The fault ledger's checks (bench/faults-ledger-29.ts), after the run: every write's answers
// against the rows of its database, live and in each restore; every acknowledged write sent again
// under its id; the workspace's budget against its ledger.
import fs from 'node:fs';
import Database from 'better-sqlite3';
import type { Redis } from 'ioredis';
import { databasePath, shardOf } from '../../src/contracts/database-id.ts';
import type { keysFor } from '../../src/redis/keys.ts';
import { AUDIT_TABLE } from '../../src/sqlite/sqlite-audit.ts';
import { agentOf, answerOf, LANES, paramsOf, type Send, sqlOf, WS, type Write } from './lanes.ts';
import type { Operator } from './operator.ts';

/** What the checks need of the run. */
export interface Ledger {
  writes: Write[];
  operator: Operator;
  /** When the data tmpfs was full (fill to free). */
  fullSpans: [number, number][];
  dataDir: string;
  shardCount: number;
  send: Send;
  r: Redis;
  keys: ReturnType<typeof keysFor>;
}

/** A write's answers in one line: codes, statuses, ok, transport errors. */
const trail = (w: Write) => w.answers.map((a) => a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>');

export async function checkLedger({ writes, operator, fullSpans, dataDir, shardCount, send, r, keys }: Ledger) {
  const { inPlace } = operator;
  const undoneBy = (w: Write, by: number) => operator.undoneBy(w, by);
  const unreadable: string[] = [];
  const rowsOf = (db: string | undefined) => {
    const id = db ? `${WS}/${db}` : WS;
    const file = databasePath(dataDir, WS, db, shardOf(id, shardCount));
    if (!fs.existsSync(file)) return undefined;
    try {
      const d = new Database(file, { readonly: true });
      try {
        return d.prepare('SELECT id, cid FROM t').all() as { id: number; cid: string }[];
      } finally {
        d.close();
      }
    } catch (err) {
      unreadable.push(`${id}: ${String(err)}`);
      return undefined;
    }
  };
  const idsIn = (db: string | undefined) => {
    const m = new Map<string, number[]>();
    for (const row of rowsOf(db) ?? []) m.set(row.cid, [...(m.get(row.cid) ?? []), row.id]);
    return m;
  };
  const holes = {
    missing: [] as string[],
    doubled: [] as string[],
    wrongRowid: [] as string[],
    refusedPresent: [] as string[],
    failedAnswerButPresent: [] as string[],
    /** Refused UNAVAILABLE "not sent" after an earlier send of the id answered that it may run, and there: see the header. */
    notSentAfterMayRun: [] as string[],
    /** An ok answer, then (in the run or at the end's resend) a refusal without mayStillRun: "nothing ran". */
    okThenNotRun: [] as string[],
    disagree: [] as string[],
    noOutcome: [] as string[],
    resendDiffers: [] as string[],
    /** A write in its database whose answer says a restore took it back (session 38, F19). */
    falseTakenBack: [] as string[],
  };
  // The last answer says this send never reached Redis (UNAVAILABLE, mayStillRun false), but an
  // earlier send of the id was answered may still run, queued, or not at all: that one may have run.
  const notSentAfterMayRun = (w: Write) => w.answers.at(-1)?.code === 'UNAVAILABLE' && w.answers.slice(0, -1).some((a) => a.mayStillRun || a.status || a.error);
  const undone: string[] = [];
  const toldTakenBack: string[] = [];
  // Which in-place restores answered "may … run" ran after all: an audit row of a restore of its
  // database (`at`: when it ran) that no restore answered ok made, from its start to a minute on.
  {
    const file = databasePath(dataDir, WS, agentOf.place, shardOf(`${WS}/${agentOf.place}`, shardCount));
    const okIds = new Set(inPlace.filter((p) => p.code === 0).map((p) => `restore:${(JSON.parse(p.out) as { undoId?: string }).undoId}`));
    let audited: { approval_id: string; at: number }[] = [];
    try {
      const d = new Database(file, { readonly: true });
      try {
        audited = d.prepare(`SELECT approval_id, at FROM ${AUDIT_TABLE} WHERE approval_id LIKE 'restore:%'`).all() as typeof audited;
      } finally {
        d.close();
      }
    } catch {
      // No audit table: no restore of it ran.
    }
    for (const p of inPlace) {
      if (p.code === 0 || !/may (still run|have run)|may have run it already/.test(p.out)) continue;
      p.ranAt = audited.find((row) => !okIds.has(row.approval_id) && row.at >= p.started && row.at <= p.started + 60_000)?.at;
    }
  }
  const live = () => Object.fromEntries(LANES.map((l) => [l, idsIn(agentOf[l])]));
  const check = (ids: Record<string, Map<string, number[]>>) => {
    for (const w of writes) {
      const got = ids[w.lane]!.get(w.cid) ?? [];
      if (got.length > 1) holes.doubled.push(w.cid);
      if (!w.outcome) {
        holes.noOutcome.push(`${w.cid} ${JSON.stringify(w.answers.at(-1))}`);
        continue;
      }
      const oks = w.answers.filter((a) => a.ok === true);
      const firstOk = w.answers.findIndex((a) => a.ok === true);
      if (firstOk >= 0 && w.answers.slice(firstOk).some((a) => a.ok === false && !a.mayStillRun)) holes.okThenNotRun.push(`${w.cid} ${trail(w)}`);
      if (new Set(oks.map((a) => a.rowid)).size > 1) holes.disagree.push(w.cid);
      if (w.outcome === 'ok' && got.length === 0) {
        // Its last ok said which restore took it back (a late ok): told truthfully.
        if (oks.at(-1)?.takenBack) toldTakenBack.push(w.cid);
        else if (undoneBy(w, Number.POSITIVE_INFINITY)) undone.push(w.cid);
        else holes.missing.push(w.cid);
      }
      if (w.outcome === 'ok' && got.length === 1 && got[0] !== oks.at(-1)!.rowid) holes.wrongRowid.push(w.cid);
      if (got.length === 1 && oks.at(-1)?.takenBack) holes.falseTakenBack.push(`${w.cid} ${oks.at(-1)!.takenBack}`);
      if (w.outcome === 'failed' && got.length && notSentAfterMayRun(w)) {
        holes.notSentAfterMayRun.push(`${w.cid} ${trail(w)}`);
        continue;
      }
      if (w.outcome === 'failed' && got.length) holes.refusedPresent.push(`${w.cid} ${w.answers.at(-1)!.code}`);
      // A failure without mayStillRun says the write had not happened: a write found there later must have an ok after it.
      let lastFail = -1;
      w.answers.forEach((a, i) => {
        if (a.ok === false && !a.mayStillRun && a.code !== 'UNAUTHENTICATED') lastFail = i;
      });
      if (got.length && lastFail >= 0 && !w.answers.slice(lastFail).some((a) => a.ok)) holes.failedAnswerButPresent.push(`${w.cid} ${trail(w)}`);
    }
  };
  check(live());
  // Every acknowledged write sent again under its id: its first outcome, nothing run again.
  const acked = writes.filter((w) => w.outcome === 'ok');
  let resent = 0;
  const resends: unknown[] = [];
  for (const w of acked) {
    // Taken back by a restore in place: sent again, it answers its ok with the restore that took it
    // back (session 38, F19), or runs again when its result has gone with an empty Redis.
    if (undoneBy(w, Number.POSITIVE_INFINITY) || toldTakenBack.includes(w.cid)) continue;
    const a = answerOf(await send(w.lane, w.cid, sqlOf(w.lane), paramsOf(w.lane, w.cid)).catch((e) => ({ ok: false, error: { code: String(e) } })));
    resent++;
    resends.push({ cid: w.cid, ...a });
    const first = w.answers.find((x) => x.ok)!;
    if (a.ok === false && !a.mayStillRun) holes.okThenNotRun.push(`${w.cid} at the end: ${a.code}`);
    if (a.takenBack) holes.falseTakenBack.push(`${w.cid} ${a.takenBack}`);
    if (a.ok !== true || a.rowid !== first.rowid) holes.resendDiffers.push(`${w.cid} ${JSON.stringify(a)} first ${first.rowid}`);
  }
  const after = live();
  // The budget's sum against its ledger: a let-go that drifted shows as a difference.
  const budgetKeys = keys.redisBudget(WS);
  const ledger = await r.zrange(budgetKeys.ledger, 0, -1, 'WITHSCORES');
  let ledgerSum = 0;
  const byKind: Record<string, { entries: number; bytes: number; pastNow: number }> = {};
  for (let i = 0; i < ledger.length; i += 2) {
    const m = /\|([^|:]+):(\d+)$/.exec(ledger[i]!);
    const bytes = Number(m?.[2] ?? 0);
    ledgerSum += bytes;
    const k = (byKind[m?.[1] ?? '?'] ??= { entries: 0, bytes: 0, pastNow: 0 });
    k.entries++;
    k.bytes += bytes;
    if (Number(ledger[i + 1]) <= Date.now()) k.pastNow++;
  }
  const budget = { held: Number((await r.get(budgetKeys.held)) ?? 0), ledgerSum, byKind };
  const doubledAfterResend = writes.filter((w) => (after[w.lane]!.get(w.cid)?.length ?? 0) > 1).map((w) => w.cid);

  const restoreChecks = operator.restores.map((rs): Record<string, unknown> => {
    const duringFull = fullSpans.some(([a, b]) => rs.started < b && rs.ended > a);
    const row: Record<string, unknown> = { lane: rs.lane, into: rs.into, at: new Date(rs.at).toISOString(), fromBlob: rs.fromBlob, exit: rs.code, duringFull };
    if (rs.code !== 0) return { ...row, answered: rs.out.slice(0, 200) };
    const ids = idsIn(rs.into);
    const moment = rs.fromBlob ? Date.parse((JSON.parse(rs.out) as { restoredTo: string }).restoredTo) : rs.at;
    const mine = writes.filter((w) => w.lane === rs.lane);
    // A write whose first ok came late, told `takenBack`: the restore in place that took it back ran
    // before that answer, so a moment after it rightly lacks the write (F20's run 2, place-2206).
    const missing = mine.filter(
      (w) =>
        w.outcome === 'ok' && w.answers.find((a) => a.ok)!.at <= moment && !ids.has(w.cid) && !undoneBy(w, moment) && !w.answers.find((a) => a.ok)!.takenBack,
    );
    return {
      ...row,
      ...(rs.fromBlob ? { restoredTo: new Date(moment).toISOString() } : {}),
      rows: ids.size,
      ackedByMoment: mine.filter((w) => w.outcome === 'ok' && w.answers.find((a) => a.ok)!.at <= moment).length,
      missing: missing.map((w) => w.cid).slice(0, 10),
      sentAfterPresent: mine
        .filter((w) => w.sent > moment && ids.has(w.cid))
        .map((w) => w.cid)
        .slice(0, 10),
      refusedPresent: mine
        .filter((w) => w.outcome === 'failed' && ids.has(w.cid) && !notSentAfterMayRun(w))
        .map((w) => w.cid)
        .slice(0, 10),
      doubled: [...ids].filter(([, v]) => v.length > 1).length,
    };
  });
  return { holes, undone, toldTakenBack, resent, resends, budget, doubledAfterResend, restoreChecks, unreadable };
}
