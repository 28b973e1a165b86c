import { describe, expect, it } from 'vitest';
import { targetTable } from '../../src/guard/target-table.ts';
import { escapeHtml, html, raw } from '../../src/http/web/html.ts';
import { highlightSql } from '../../src/http/web/sql-highlight.ts';

describe('html escaping', () => {
  it('escapes every interpolation by default', () => {
    const evil = `<script>alert("x")</script><img src=x onerror='y'>&amp;`;
    expect(html`<p title="${evil}">${evil}</p>`.value).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;amp;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;amp;</p>',
    );
  });

  it('keeps markup made by the tag or raw(), and escapes inside arrays', () => {
    const items = ['<b>', 'ok'].map((t) => html`<li>${t}</li>`);
    expect(html`<ul>${items}</ul>${raw('<hr>')}`.value).toBe('<ul><li>&lt;b&gt;</li><li>ok</li></ul><hr>');
  });

  it('renders null, undefined and false as nothing, numbers as text', () => {
    expect(html`${null}${undefined}${false}${0}${1.5}`.value).toBe('01.5');
  });

  it('escapes the five characters and nothing else', () => {
    expect(escapeHtml(`a&b<c>d"e'f ünï`)).toBe('a&amp;b&lt;c&gt;d&quot;e&#39;f ünï');
  });
});

describe('SQL highlighting', () => {
  it('wraps tokens in spans and escapes their text', () => {
    const out = highlightSql(`INSERT INTO t VALUES ('</code><script>x</script>', 1, ?) -- <b>`).value;
    expect(out).toContain('<span class="sql-k">INSERT</span>');
    expect(out).toContain(`<span class="sql-s">&#39;&lt;/code&gt;&lt;script&gt;x&lt;/script&gt;&#39;</span>`);
    expect(out).toContain('<span class="sql-n">1</span>');
    expect(out).toContain('<span class="sql-c">-- &lt;b&gt;</span>');
    expect(out).not.toMatch(/<script|<b>|<\/code>/);
  });

  it('shows SQL the tokenizer cannot read as plain escaped text', () => {
    expect(highlightSql(`SELECT '<unterminated`).value).toBe('SELECT &#39;&lt;unterminated');
  });
});

describe('the table a write touches', () => {
  it.each([
    ['INSERT INTO notes(body) VALUES (1)', 'notes'],
    ['insert or replace into main."We""ird" values (1)', 'We"ird'],
    ['REPLACE INTO `t2` VALUES (1)', 't2'],
    ['UPDATE OR IGNORE [T] SET a = 1', 'T'],
    ['DELETE FROM t WHERE 1', 't'],
    ['CREATE TABLE IF NOT EXISTS Foo(a)', 'Foo'],
    ['CREATE UNIQUE INDEX i ON bar(a)', 'bar'],
    ['ALTER TABLE x ADD COLUMN y', 'x'],
    ['WITH c AS (SELECT 1) INSERT INTO z SELECT * FROM c', 'z'],
    ['CREATE VIEW v AS SELECT 1', 'v'],
    ["INSERT INTO logs VALUES ('delete from other')", 'logs'],
  ])('%s → %s', (sql, table) => {
    expect(targetTable(sql)).toBe(table);
  });

  it('says nothing when it cannot tell', () => {
    expect(targetTable('SELECT 1')).toBeUndefined();
    expect(targetTable("INSERT INTO 'x")).toBeUndefined();
    expect(targetTable('INSERT INTO a VALUES (1); DELETE FROM b')).toBeUndefined();
  });
});
