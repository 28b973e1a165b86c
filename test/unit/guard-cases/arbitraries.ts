import fc from 'fast-check';
import { isTrivia, tokenize } from '../../../src/guard/tokenizer.ts';
import { ALLOWED } from './allowed.ts';
import { REFUSED } from './refused.ts';

/** Reads that run against the SCHEMA in db.ts; recursive ones are bounded so none runs forever. */
const READS = [
  'SELECT * FROM t',
  'SELECT a, b FROM tv WHERE a > 1 ORDER BY b',
  'SELECT x, y FROM u JOIN t ON t.a = u.x',
  'SELECT count(*) FROM c JOIN p ON p.id = c.pid',
  "SELECT value FROM json_each('[1,2,3]')",
  'SELECT key, fullkey FROM json_tree(\'{"a":[1,{"b":2}]}\')',
  'WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r LIMIT 20) SELECT * FROM r',
  'WITH m AS MATERIALIZED (SELECT * FROM t) SELECT b FROM m',
  'SELECT sum(a) OVER (ORDER BY a) FROM t',
  'VALUES (1, 2), (3, 4)',
  'SELECT sqlite_version(), typeof(x), note FROM u',
  "SELECT 'sqlite_master', '_agentdb_calls', 'pragma_table_list'",
];

const WRITES = [
  "INSERT INTO t (b) VALUES ('w')",
  'UPDATE t SET b = NULL',
  'DELETE FROM u',
  'REPLACE INTO p VALUES (1)',
  'CREATE TABLE z (a)',
  'CREATE INDEX zi ON t(b)',
  'CREATE VIEW zv AS SELECT 1',
  'ALTER TABLE t ADD COLUMN z',
  "INSERT INTO t (b) VALUES ('x') RETURNING *",
  'WITH q AS (SELECT 1) DELETE FROM t WHERE a IN q',
  'INSERT INTO u VALUES (1, 2, 3) ON CONFLICT DO NOTHING',
];

/** Statements that must do nothing to the file however they are dressed. */
const DANGEROUS = [
  'SELECT * FROM sqlite_master',
  'SELECT sql FROM sqlite_schema',
  'SELECT * FROM _agentdb_calls',
  "SELECT * FROM pragma_table_info('_agentdb_calls')",
  'SELECT * FROM pragma_table_list',
  'SELECT * FROM dbstat',
  'SELECT * FROM sqlite_sequence',
  'SELECT * FROM temp.sqlite_master',
  "SELECT load_extension('x')",
  'PRAGMA writable_schema = ON',
  'PRAGMA trusted_schema = ON',
  'PRAGMA user_version = 7',
  'PRAGMA journal_mode = DELETE',
  "ATTACH 'file::memory:' AS m",
  "VACUUM INTO '/tmp/agentdb-guard-vacuum-copy.db'",
  'VACUUM',
  'DELETE FROM t',
  'DROP TABLE t',
  'UPDATE _agentdb_calls SET result = 1',
  'CREATE TEMP TABLE x (a)',
  'BEGIN; DELETE FROM t; COMMIT',
  'SELECT 1; DELETE FROM t',
  'COMMIT',
  'ANALYZE',
  'CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM u; END',
];

const NAMES = [
  't',
  'u',
  'tv',
  'p',
  'c',
  'sqlite_master',
  'sqlite_schema',
  'sqlite_sequence',
  'sqlite_temp_master',
  '_agentdb_calls',
  'pragma_table_list',
  'pragma_table_info',
  'dbstat',
  'json_each',
  'json_tree',
  'temp',
  'main',
  'load_extension',
  'writable_schema',
  'trusted_schema',
  'user_version',
  'result',
];

const KEYWORDS = [
  'SELECT',
  'FROM',
  'WHERE',
  'INSERT',
  'INTO',
  'VALUES',
  'UPDATE',
  'SET',
  'DELETE',
  'DROP',
  'TABLE',
  'CREATE',
  'PRAGMA',
  'ATTACH',
  'DETACH',
  'VACUUM',
  'WITH',
  'AS',
  'RECURSIVE',
  'MATERIALIZED',
  'NOT',
  'UNION',
  'ALL',
  'RETURNING',
  'ON',
  'CONFLICT',
  'DO',
  'NOTHING',
  'JOIN',
  'TEMP',
  'BEGIN',
  'COMMIT',
  'ROLLBACK',
  'SAVEPOINT',
  'EXPLAIN',
  'ALTER',
  'RENAME',
  'TO',
  'ADD',
  'COLUMN',
  'REPLACE',
  'OR',
  'INDEXED',
  'BY',
  'IN',
  'LIMIT',
  'ORDER',
  'VIEW',
  'INDEX',
  'TRIGGER',
  'END',
];

/** A name under one of SQLite's five spellings (bare, "…", […], `…`, '…'), case scrambled. */
export const spelledName = (name: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc.tuple(name, fc.constantFrom('bare', 'dq', 'sq', 'br', 'bt'), fc.boolean()).map(([n, style, upper]) => {
    const v = upper ? n.toUpperCase() : n;
    return { bare: v, dq: `"${v}"`, sq: `'${v}'`, br: `[${v}]`, bt: `\`${v}\`` }[style];
  });

const trivia = fc.constantFrom(' ', '\n', '/* DROP TABLE t; */', '-- ; PRAGMA x\n', '\t', '/**/');

/** Random token soup: keywords, spelled names, punctuation, literals and comments. */
export const soup: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      fc.constantFrom(...KEYWORDS),
      spelledName(fc.constantFrom(...NAMES)),
      fc.constantFrom('(', ')', ',', '.', ';', '*', '=', "'a'", '1', "x'00'", '?', ':p', '||'),
      trivia,
    ),
    { minLength: 1, maxLength: 14 },
  )
  .map((parts) => parts.join(' '));

/** A known statement re-dressed: names respelled, comments between tokens, prefixes, wrappers. */
const mutate = (base: string): fc.Arbitrary<string> => {
  const lexed = tokenize(base);
  if (!lexed.ok) return fc.constant(base);
  const tokens = lexed.tokens.filter((t) => !isTrivia(t));
  return fc
    .tuple(
      fc.array(fc.tuple(spelledName(fc.constantFrom(...NAMES)), trivia, fc.boolean(), fc.boolean()), {
        minLength: tokens.length,
        maxLength: tokens.length,
      }),
      fc.constantFrom('none', 'subquery', 'cte', 'lead', 'tail', 'main'),
    )
    .map(([choices, wrap]) => {
      const body = tokens
        .map((t, i) => {
          const [respelled, gap, flipCase, respell] = choices[i]!;
          let text = t.text;
          if (t.kind === 'word' && NAMES.includes(t.value) && respell) text = respelled;
          else if (t.kind === 'word' && flipCase) text = text.toLowerCase();
          return text + gap;
        })
        .join('');
      switch (wrap) {
        case 'subquery':
          return `SELECT * FROM (${body})`;
        case 'cte':
          return `WITH x AS (${body}) SELECT * FROM x`;
        case 'lead':
          return `; /* x */ ${body}`;
        case 'tail':
          return `${body}; ${base}`;
        case 'main':
          return body.replace(/\bFROM\s+/i, 'FROM main.');
        default:
          return body;
      }
    });
};

/** Writes that must never reach agentdb's or the engine's tables, or leave forbidden objects. */
const DANGEROUS_WRITES = [
  'DELETE FROM _agentdb_calls',
  "UPDATE _agentdb_calls SET result = 'x'",
  'INSERT INTO _agentdb_calls VALUES (1, 2, 3)',
  'ALTER TABLE _agentdb_calls RENAME TO stolen',
  'ALTER TABLE t RENAME TO _agentdb_t',
  'CREATE TABLE stolen AS SELECT * FROM _agentdb_calls',
  'INSERT INTO t (b) SELECT result FROM _agentdb_calls',
  "UPDATE sqlite_sequence SET seq = 0 WHERE name = 't'",
  "INSERT INTO sqlite_master VALUES ('table', 'x', 'x', 0, 'CREATE TABLE x(a)')",
  'DROP TABLE u',
  'ALTER TABLE u DROP COLUMN note',
  'CREATE TEMP TABLE tt (a)',
  'CREATE TABLE temp.tt (a)',
  'CREATE TRIGGER tr AFTER INSERT ON t BEGIN DELETE FROM u; END',
  'CREATE VIRTUAL TABLE f USING fts5(a)',
  'CREATE TABLE s AS SELECT * FROM sqlite_master',
  'CREATE TABLE pl AS SELECT * FROM pragma_table_list',
  "INSERT INTO t (b) SELECT load_extension('x')",
  'CREATE INDEX ci ON _agentdb_calls(result)',
  "REPLACE INTO sqlite_sequence VALUES ('u', 5)",
];

const refusedSql = REFUSED.flatMap((g) => g.sql);
const allowedSql = ALLOWED.flatMap((g) => g.sql);

/** Every kind of statement the query path might be sent. */
export const anyStatement: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...READS) },
  { weight: 1, arbitrary: fc.constantFrom(...WRITES) },
  { weight: 2, arbitrary: fc.constantFrom(...refusedSql, ...allowedSql) },
  { weight: 3, arbitrary: soup },
  { weight: 4, arbitrary: fc.constantFrom(...DANGEROUS, ...READS).chain(mutate) },
);

/** Every kind of statement the write path might be sent. */
export const anyWrite: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...WRITES) },
  { weight: 2, arbitrary: fc.constantFrom(...refusedSql, ...allowedSql) },
  { weight: 2, arbitrary: soup },
  { weight: 4, arbitrary: fc.constantFrom(...DANGEROUS_WRITES, ...WRITES).chain(mutate) },
);
