import type { Op } from './bytecode.ts';

/** Opcodes whose P2, when not 0, is the address they may jump to. */
const JUMP_BY_P2 = new Set([
  'Goto',
  'Once',
  'If',
  'IfNot',
  'IsNull',
  'NotNull',
  'IfNullRow',
  'MustBeInt',
  'Eq',
  'Ne',
  'Lt',
  'Le',
  'Gt',
  'Ge',
  'SeekRowid',
  'NotExists',
  'SeekGE',
  'SeekGT',
  'SeekLE',
  'SeekLT',
  'IdxGE',
  'IdxGT',
  'IdxLE',
  'IdxLT',
  'Found',
  'NotFound',
  'Rewind',
  'Last',
]);

/** Opcodes that never jump (P2 is a register or a count, if anything). */
const STRAIGHT = new Set([
  'Transaction',
  'TableLock',
  'ReadCookie',
  'OpenRead',
  'ColumnsUsed',
  'Close',
  'Variable',
  'Integer',
  'Int64',
  'Real',
  'String',
  'String8',
  'Blob',
  'Null',
  'SoftNull',
  'Copy',
  'SCopy',
  'IntCopy',
  'Column',
  'Rowid',
  'IdxRowid',
  'DeferredSeek',
  'NullRow',
  'Count',
  'Affinity',
  'RealAffinity',
  'Cast',
  'CollSeq',
  'Function',
  'PureFunc',
  'AggStep',
  'AggFinal',
  'Add',
  'Subtract',
  'Multiply',
  'Divide',
  'Remainder',
  'Concat',
  'BitAnd',
  'BitOr',
  'BitNot',
  'ShiftLeft',
  'ShiftRight',
  'Not',
  'ZeroOrNull',
  'Noop',
  'Halt',
]);

/**
 * Whether a compiled program returns at most one row, whatever its parameters: one `ResultRow`,
 * and no instruction that can run twice. Every opcode must be one known not to jump, or to jump
 * only to its P2, and then only forward within the body; the one jump back allowed is the
 * trailer's (`Init` jumps to the transaction set-up at the end, which returns to the start once).
 * A dynamic jump (`Return`, `Yield`), a loop (`Next`, `VNext`) or anything unknown says no.
 * Row counts are a property of the query, not of its plan, so what one compilation (EXPLAIN's,
 * with NULL parameters) shows holds for every run against the same schema.
 */
export function singleRow(ops: readonly Op[]): boolean {
  const init = ops[0];
  if (ops.length < 2 || init?.opcode !== 'Init') return false;
  const trailer = init.p2;
  const last = ops.length - 1;
  // The body must end in Halt: falling through into the trailer would run its Goto back to the
  // start, and the body again, as often as it fell through.
  if (trailer < 2 || trailer > last || ops[trailer - 1]?.opcode !== 'Halt') return false;
  let rows = 0;
  for (let addr = 1; addr < ops.length; addr++) {
    const op = ops[addr]!;
    if (op.addr !== addr) return false;
    if (op.opcode === 'ResultRow') {
      if (++rows > 1) return false;
      continue;
    }
    if (addr === last && op.opcode === 'Goto' && op.p2 === 1 && addr >= trailer) continue;
    if (STRAIGHT.has(op.opcode)) continue;
    if (!JUMP_BY_P2.has(op.opcode)) return false;
    if (op.p2 !== 0 && (op.p2 <= addr || (addr < trailer && op.p2 >= trailer) || op.p2 > last)) return false;
  }
  return true;
}
