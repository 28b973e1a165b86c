import { describe, expect, it } from 'vitest';
import { canonicalJson, digestOf } from '../../src/contracts/call-identity.ts';
import { effectDigest } from '../../src/sqlite/call-record.ts';

describe('canonicalJson', () => {
  it('sorts the keys of every object, also one inside arrays', () => {
    const a = { b: 1, a: [{ y: 2, x: [{ q: 1, p: 2 }] }] };
    const b = { a: [{ x: [{ p: 2, q: 1 }], y: 2 }], b: 1 };
    expect(canonicalJson(a)).toBe('{"a":[{"x":[{"p":2,"q":1}],"y":2}],"b":1}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(digestOf(a)).toBe(digestOf(b));
  });

  it('writes arrays of scalars as JSON.stringify does, so a write keeps the digest it was recorded under', () => {
    const effect = ['write', 'INSERT INTO t (v) VALUES (?, ?, ?, ?)', ['é"\\', -0, null, true]] as const;
    expect(canonicalJson(effect)).toBe(JSON.stringify(effect));
    // The sha256 of `["write","INSERT INTO t (v) VALUES (?)",["row 1"]]`, as records made before
    // hold it: a digest that changed would answer every re-sent recorded call with a conflict.
    expect(effectDigest(['write', 'INSERT INTO t (v) VALUES (?)', ['row 1']])).toBe('2f1e1dae4aeb9e6f089caa609c2f9b1223c169d0f64bb163a22603130e8084ab');
  });

  it('serialises objects with their own JSON (a Date) as before', () => {
    expect(canonicalJson([new Date(0), { b: new Date(0), a: 1 }])).toBe('["1970-01-01T00:00:00.000Z",{"a":1,"b":"1970-01-01T00:00:00.000Z"}]');
  });
});
