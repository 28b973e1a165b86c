import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { isTrivia, tokenize, type Token } from '../../src/guard/tokenizer.ts';

function lex(sql: string): Token[] {
  const r = tokenize(sql);
  if (!r.ok) throw new Error(`expected tokens for ${JSON.stringify(sql)}, got: ${r.reason}`);
  return r.tokens;
}

/** Significant tokens as `kind:value`. */
function shape(sql: string): string[] {
  return lex(sql)
    .filter((t) => !isTrivia(t))
    .map((t) => `${t.kind}:${t.value}`);
}

function failure(sql: string): string {
  const r = tokenize(sql);
  if (r.ok) throw new Error(`expected ${JSON.stringify(sql)} to fail, got ${JSON.stringify(r.tokens.map((t) => t.text))}`);
  return r.reason;
}

// In-memory SQLite, the reference the tokenizer must agree with.
const db = new Database(':memory:');
afterAll(() => db.close());

describe('tokenizer: quoting', () => {
  it('reads single-quoted strings with doubled quotes as escapes', () => {
    expect(shape("'it''s'")).toEqual(["string:it's"]);
    expect(shape("''")).toEqual(['string:']);
    expect(shape("'a' 'b'")).toEqual(['string:a', 'string:b']);
  });

  it('keeps the case of strings but lower-cases names (ASCII only, as SQLite compares them)', () => {
    expect(shape("'MiXeD'")).toEqual(['string:MiXeD']);
    expect(shape('"MiXeD"')).toEqual(['quoted:mixed']);
    expect(shape('SeLeCt')).toEqual(['word:select']);
    expect(shape('"ÄBC"')).toEqual(['quoted:Äbc']);
  });

  it('reads all three quoted identifier styles and their escapes', () => {
    expect(shape('"a""b"')).toEqual(['quoted:a"b']);
    expect(shape('`a``b`')).toEqual(['quoted:a`b']);
    expect(shape('[a"b`c]')).toEqual(['quoted:a"b`c']);
    // [..] has no escape: the first ] ends it, and a lone ] is no token at all.
    expect(shape('[a[b]')).toEqual(['quoted:a[b']);
    expect(failure('[a]]')).toMatch(/unrecognized/);
  });

  it('treats keywords inside strings and quoted names as text', () => {
    const toks = lex("INSERT INTO notes VALUES ('drop table t; pragma x')");
    expect(toks.filter((t) => t.kind === 'semicolon')).toHaveLength(0);
    expect(shape('"drop table"')).toEqual(['quoted:drop table']);
  });

  it('refuses unterminated strings and identifiers', () => {
    expect(failure("SELECT 'abc")).toMatch(/unterminated string/);
    expect(failure("SELECT 'it''")).toMatch(/unterminated string/);
    expect(failure('SELECT "abc')).toMatch(/unterminated quoted identifier/);
    expect(failure('SELECT `abc')).toMatch(/unterminated quoted identifier/);
    expect(failure('SELECT [abc')).toMatch(/unterminated \[identifier/);
  });

  it('agrees with SQLite on the value of any string literal', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom("'", '"', '`', 'a', ' ', ';', '-', '*', '/', '\n', 'é') }), (s) => {
        const literal = `'${s.replaceAll("'", "''")}'`;
        const [t] = lex(literal);
        expect(t).toMatchObject({ kind: 'string', value: s, text: literal });
        expect(db.prepare(`SELECT ${literal}`).pluck().get()).toBe(s);
      }),
      { numRuns: 300 },
    );
  });

  it('agrees with SQLite on the name a quoted identifier spells', () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom('"', '`', 'a', 'B', ' ', ';', "'", '-'), minLength: 1 }), (s) => {
        const quoted = `"${s.replaceAll('"', '""')}"`;
        const [t] = lex(quoted);
        const column = db.prepare(`SELECT 1 AS ${quoted}`).columns()[0]!.name;
        expect(t!.value).toBe(column.toLowerCase());
      }),
      { numRuns: 300 },
    );
  });
});

describe('tokenizer: comments and whitespace', () => {
  it('reads -- comments to the end of the line', () => {
    const toks = lex('SELECT 1 -- DROP TABLE t;\nFROM t');
    expect(toks.find((t) => t.kind === 'comment')?.text).toBe('-- DROP TABLE t;');
    expect(toks.some((t) => t.kind === 'semicolon')).toBe(false);
  });

  it('reads /* */ comments, an unterminated one running to the end', () => {
    expect(shape('SELECT /* ; DROP */ 1')).toEqual(['word:select', 'number:1']);
    expect(shape('SELECT 1 /* ; DROP TABLE t')).toEqual(['word:select', 'number:1']);
    expect(lex('/**/').map((t) => t.kind)).toEqual(['comment']);
    // "/*/" is not closed: the search for */ starts after the opening.
    expect(lex('/*/ x').map((t) => t.kind)).toEqual(['comment']);
  });

  it('reads "/*" at the very end as a slash and a star, as SQLite does', () => {
    expect(shape('1 /*')).toEqual(['number:1', 'operator:/', 'operator:*']);
  });

  it('treats vertical tab as whitespace only after other whitespace', () => {
    expect(shape('SELECT \u000b1')).toEqual(['word:select', 'number:1']);
    expect(failure('SELECT\u000b1')).toMatch(/unrecognized/);
  });

  it('treats a byte order mark as whitespace and refuses NUL', () => {
    expect(shape('\ufeffSELECT 1')).toEqual(['word:select', 'number:1']);
    expect(failure('SELECT 1\u0000; DROP TABLE t')).toMatch(/NUL/);
    expect(failure("SELECT 'a\u0000'")).toMatch(/NUL/);
  });

  it('records offsets that point at each token', () => {
    const sql = "SELECT  x, 'y' /* c */ FROM [t]";
    for (const t of lex(sql)) expect(sql.slice(t.offset, t.offset + t.text.length)).toBe(t.text);
    expect(
      lex(sql)
        .map((t) => t.text)
        .join(''),
    ).toBe(sql);
  });
});

describe('tokenizer: literals, parameters, operators', () => {
  it('reads blobs and refuses malformed ones', () => {
    expect(shape("x'0aFF'")).toEqual(['blob:0aff']);
    expect(shape("X''")).toEqual(['blob:']);
    expect(failure("x'abc'")).toMatch(/blob/);
    expect(failure("x'0g'")).toMatch(/blob/);
    expect(shape('x1')).toEqual(['word:x1']);
  });

  it('reads numbers in every SQLite form and refuses numbers glued to names', () => {
    for (const n of ['1', '1.5', '.5', '1.', '1e10', '1E+5', '2.5e-3', '0x1F', '1_000', '0xFF_FF', '1_0.5_5e1_0']) {
      expect(shape(n)).toEqual([`number:${n}`]);
    }
    expect(failure('1abc')).toMatch(/unrecognized/);
    expect(failure('1e')).toMatch(/unrecognized/);
    expect(failure('0x')).toMatch(/unrecognized/);
    for (const n of ['1_', '1__0', '1_.5', '1._5', '0x_1', '0x1_']) expect(failure(n)).toMatch(/unrecognized/);
    expect(shape('1.5.5')).toEqual(['number:1.5', 'number:.5']);
  });

  it('reads every parameter style', () => {
    expect(shape('? ?12 :name @n $v $a$b #x')).toEqual(['param:?', 'param:?12', 'param::name', 'param:@n', 'param:$v', 'param:$a$b', 'param:#x']);
    expect(failure('SELECT :')).toMatch(/unrecognized/);
    expect(failure('SELECT $')).toMatch(/unrecognized/);
  });

  it('reads operators, longest first', () => {
    expect(shape('a->>b->c||d<=e<>f!=g==h<<i>>j')).toEqual([
      'word:a',
      'operator:->>',
      'word:b',
      'operator:->',
      'word:c',
      'operator:||',
      'word:d',
      'operator:<=',
      'word:e',
      'operator:<>',
      'word:f',
      'operator:!=',
      'word:g',
      'operator:==',
      'word:h',
      'operator:<<',
      'word:i',
      'operator:>>',
      'word:j',
    ]);
    expect(shape('(a,b.c);')).toEqual(['operator:(', 'word:a', 'operator:,', 'word:b', 'operator:.', 'word:c', 'operator:)', 'semicolon:;']);
  });

  it('refuses characters SQLite does not know', () => {
    for (const bad of ['!', '\\', '^', '{', '}', '\u0001', '\u007f']) expect(failure(`SELECT 1 ${bad}`)).toMatch(/unrecognized/);
  });

  it('reads $ and non-ASCII characters as part of names', () => {
    expect(shape('a$b')).toEqual(['word:a$b']);
    expect(shape('ÉTÉ')).toEqual(['word:ÉtÉ']);
    // A no-break space is a name character to SQLite (UTF-8 bytes >= 0x80), not whitespace.
    expect(shape('SELECT\u00a0x')).toEqual(['word:select\u00a0x']);
  });

  it('agrees with SQLite on which inputs are unrecognized tokens', () => {
    const pieces = ["'", '"', '`', '[', ']', 'x', '1', '.', 'e', '$', ':', '?', '#', '!', '=', '_', ' ', 'a', '0x', '-', 'f', '+', '/*', '*/', '--', '\n'];
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 8 }), (parts) => {
        const sql = `SELECT ${parts.join('')}`;
        const mine = tokenize(sql);
        let sqliteUnrecognized = false;
        let prepared = false;
        try {
          db.prepare(sql);
          prepared = true;
        } catch (err) {
          sqliteUnrecognized = /unrecognized token/.test((err as Error).message);
        }
        if (sqliteUnrecognized) expect(mine.ok).toBe(false);
        if (prepared) expect(mine.ok).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});
