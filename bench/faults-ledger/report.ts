// The fault ledger's report (bench/faults-ledger-29.ts): the run's counts, the checks' holes, and
// what the processes, Redis and the operator's CLI runs did, as one JSON object.
import type { checkLedger } from './checks.ts';
import type { Faults } from './faults.ts';
import { LANES, type Write } from './lanes.ts';
import type { Operator } from './operator.ts';
import type { Supervisor } from './supervisor.ts';

export function reportOf(
  out: string,
  writes: Write[],
  checked: Awaited<ReturnType<typeof checkLedger>>,
  faults: Faults,
  supervisor: Supervisor,
  operator: Operator,
) {
  const { holes, undone, toldTakenBack, resent, budget, doubledAfterResend, restoreChecks, unreadable } = checked;
  const { inPlace, cliRuns } = operator;
  const { fullSpans } = faults;
  const codes: Record<string, number> = {};
  for (const w of writes)
    for (const a of w.answers)
      if (!a.ok) {
        const k = `${w.lane} ${a.code ?? a.status ?? 'transport'}${a.mayStillRun ? ' mayStillRun' : ''}`;
        codes[k] = (codes[k] ?? 0) + 1;
      }
  return {
    out,
    faults: faults.faults,
    writes: writes.length,
    byLane: Object.fromEntries(
      LANES.map((l) => {
        const mine = writes.filter((w) => w.lane === l);
        return [
          l,
          {
            writes: mine.length,
            ok: mine.filter((w) => w.outcome === 'ok').length,
            refused: mine.filter((w) => w.outcome === 'failed').length,
            resent: mine.filter((w) => w.answers.length > 1).length,
          },
        ];
      }),
    ),
    answersNotOk: codes,
    holes: Object.fromEntries(Object.entries(holes).map(([k, v]) => [k, { count: v.length, some: v.slice(0, 8) }])),
    resentAtEnd: resent,
    inPlace: {
      ok: inPlace.filter((p) => p.code === 0).length,
      duringFullOk: inPlace.filter((p) => p.code === 0 && fullSpans.some(([a, b]) => p.started < b && p.ended > a)).length,
      refused: inPlace.filter((p) => p.code !== 0).map((p) => `exit ${p.code} ${p.out.slice(0, 160)}`),
      undoneWrites: undone.length,
      toldTakenBack: toldTakenBack.length,
      lateOksTakenBack: writes
        .filter((w) => w.answers.some((a) => a.takenBack))
        .map((w) => `${w.cid} ${w.answers.map((a) => a.takenBack ?? a.code ?? a.status ?? (a.ok ? 'ok' : a.error)).join('>')}`),
      undoneByMayHaveRun: undone.filter((cid) => {
        const w = writes.find((x) => x.cid === cid)!;
        return !inPlace.some((p) => p.code === 0 && w.answers.some((a) => a.ok && a.at > p.at && a.at <= p.ended));
      }).length,
      ranAfterMayRun: inPlace.filter((p) => p.ranAt !== undefined).map((p) => ({ at: new Date(p.at).toISOString(), ranAt: new Date(p.ranAt!).toISOString() })),
    },
    budget,
    childrenLeft: supervisor.childrenLeft,
    redisStray: faults.redisStray,
    restartsRefused: supervisor.restartsRefused,
    unexpectedExits: supervisor.unexpectedExits,
    unreadable,
    doubledAfterResend,
    restores: {
      ok: restoreChecks.filter((x) => x.exit === 0).length,
      refused: restoreChecks.filter((x) => x.exit !== 0).map((x) => `${x.at} ${String(x.answered).slice(0, 100)}`),
      withHoles: restoreChecks.filter(
        (x) => (x.exit === 0 && [x.missing, x.sentAfterPresent, x.refusedPresent].some((v) => (v as string[]).length)) || Number(x.doubled) > 0,
      ),
      acksChecked: restoreChecks.reduce((n, x) => n + Number(x.ackedByMoment ?? 0), 0),
      duringFull: {
        ok: restoreChecks.filter((x) => x.duringFull && x.exit === 0).length,
        acksChecked: restoreChecks.filter((x) => x.duringFull).reduce((n, x) => n + Number(x.ackedByMoment ?? 0), 0),
        refused: restoreChecks.filter((x) => x.duringFull && x.exit !== 0).map((x) => `exit ${x.exit} ${String(x.answered).slice(0, 160)}`),
      },
    },
    cliRefusals: Object.entries(
      cliRuns
        .filter((c) => c.code !== 0)
        .reduce<Record<string, number>>((m, c) => {
          const k = `${c.label.split(' ')[0]} exit ${c.code}: ${c.out.split('\n')[0]!.slice(0, 140)}`;
          m[k] = (m[k] ?? 0) + 1;
          return m;
        }, {}),
    ),
    backups: cliRuns.filter((c) => c.label.startsWith('backup')).map((c) => `${new Date(c.at).toISOString()} exit ${c.code} ${c.out.slice(0, 80)}`),
  };
}
