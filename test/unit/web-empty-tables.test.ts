import { describe, expect, it } from 'vitest';
import { droppedNote, tablesView } from '../../src/http/web/data-views.ts';
import { html } from '../../src/http/web/html.ts';

// What a database page says when it has no tables, and after a drop: the shared database has no
// single agent, a database whose tables were dropped is not one nobody wrote, and a person who
// dropped a table needs to know where to get it back.
describe('a database page without tables', () => {
  const empty = { tables: [] } as unknown as Parameters<typeof tablesView>[1];

  it('names the shared database as shared, not as an agent', () => {
    const page = tablesView('acme', empty, html``).value;
    expect(page).toContain('No tables in the shared database');
    expect(page).not.toContain('the agent');
  });

  it("says an agent's database may have had its tables dropped", () => {
    expect(tablesView('acme/scout', empty, html``).value).toContain('the agent has not created any, or has dropped them');
  });

  it('tells whoever dropped a table how to get it back', () => {
    expect(droppedNote('acme', '<b>leads</b>').value).toBe(
      `Dropped &lt;b&gt;leads&lt;/b&gt;. The drop is in the database's history: to get the table back, restore a moment before it in <a href="/data/history?db=acme">History and restore</a>.`,
    );
  });
});
