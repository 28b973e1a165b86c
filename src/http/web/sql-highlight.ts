import { tokenize } from '../../guard/tokenizer.ts';
import { html, type Html } from './html.ts';

/** Words shown as keywords; anything else bare is a name. */
const KEYWORDS = new Set(
  (
    'select from where insert into values update set delete replace create table index view alter add column rename to drop ' +
    'and or not null is in like glob between exists case when then else end as on join left right inner outer cross using ' +
    'group by order having limit offset distinct all union intersect except with recursive returning primary key unique ' +
    'default references foreign check constraint if asc desc collate integer text real blob numeric conflict do nothing'
  ).split(' '),
);

/**
 * SQL as highlighted text: the guard's own tokenizer splits it (so what is shown as a string is
 * what SQLite reads as one), and each token becomes a span whose text is escaped like any other
 * interpolation. SQL the tokenizer cannot read is shown plain.
 */
export function highlightSql(sql: string): Html {
  const lexed = tokenize(sql);
  if (!lexed.ok) return html`${sql}`;
  return html`${lexed.tokens.map((t) => {
    const cls =
      t.kind === 'word' && KEYWORDS.has(t.value)
        ? 'k'
        : t.kind === 'string'
          ? 's'
          : t.kind === 'number' || t.kind === 'blob'
            ? 'n'
            : t.kind === 'comment'
              ? 'c'
              : t.kind === 'param'
                ? 'p'
                : '';
    return cls ? html`<span class="sql-${cls}">${t.text}</span>` : html`${t.text}`;
  })}`;
}
