import { expect, it } from 'vitest';
import type { HistoryClient } from '../../src/shards/history-client.ts';
import type { Sandbox } from '../helpers/harness.ts';
import { withWebHistory } from '../helpers/web-history.ts';
import type { WebServer } from '../helpers/web-server.ts';

// A restore form sent twice (a double click, a browser resubmitting the POST, going back and
// submitting it again) restored twice: two undo points and two RESTORE entries where the person
// meant one (session 32, N8). The same form now restores once; a second submission answers the
// first one's redirect. Over HTTP, as a browser sends the forms.
const DB = 'acme/scout';

let box: Sandbox;
let web: WebServer;
let history: HistoryClient;
let cookie = '';

withWebHistory((h) => ({ box, web, history, cookie } = h));

/** The hidden fields of each form of the history page posting to `action`, in page order. */
async function formsOf(action: string): Promise<URLSearchParams[]> {
  const r = await fetch(`${web.url}/data/history?db=${encodeURIComponent(DB)}`, { headers: { cookie, accept: 'text/html' } });
  expect(r.status).toBe(200);
  const page = await r.text();
  const forms = [...page.matchAll(new RegExp(`<form method="post" action="${action}"[^>]*>([\\s\\S]*?)</form>`, 'g'))];
  return forms.map(([, body]) => new URLSearchParams([...body!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map(([, n, v]) => [n!, v!])));
}

const post = (action: string, fields: URLSearchParams) =>
  fetch(`${web.url}${action}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, origin: web.url, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    body: fields.toString(),
  });

const restores = async () => (await history.activity(DB, {}, 'operator')).entries.filter((e) => e.kind === 'restore');

it('restores once for the same activity form sent again, or sent from the page shown again while nothing changed; anew once something did', {
  timeout: 60_000,
}, async () => {
  // The newest entry (the insert of 2): restore to just before it.
  const form = (await formsOf('/data/history/activity-restore'))[0]!;
  form.set('confirm', DB);
  // A mistyped confirmation restores nothing, and the same form corrected then runs.
  const typo = new URLSearchParams(form);
  typo.set('confirm', 'acme/other');
  expect((await post('/data/history/activity-restore', typo)).status).toBe(400);
  expect(await restores()).toHaveLength(0);

  // Sent, then sent again once it is done (a browser resending the POST).
  const a = await post('/data/history/activity-restore', form);
  const again = await post('/data/history/activity-restore', form);
  expect(a.status).toBe(303);
  expect(a.headers.get('location')).toMatch(/restored=u/);
  expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(1);
  expect(again.status).toBe(303);
  expect(again.headers.get('location')).toBe(a.headers.get('location'));

  // Back, and the same entry's form submitted again: the page is shown anew (a new token).
  const sameEntry = async () => {
    const f = (await formsOf('/data/history/activity-restore')).find((x) => x.get('before') === form.get('before'))!;
    expect(f.get('once')).not.toBe(form.get('once'));
    f.set('confirm', DB);
    return f;
  };
  const back = await post('/data/history/activity-restore', await sameEntry());
  expect(back.headers.get('location')).toBe(a.headers.get('location'));
  expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(1);
  expect(await restores()).toHaveLength(1);

  // Once an agent wrote since, the same request restores anew: it now takes that write away too.
  expect(
    await box
      .client()
      .call({ workspace: 'acme', agent: 'scout', settings: { database: 'agent' }, tool: 'DATA_WRITE_SQL', arguments: { sql: 'INSERT INTO t VALUES (3)' } }),
  ).toMatchObject({ ok: true });
  const anew = await post('/data/history/activity-restore', await sameEntry());
  expect(anew.status).toBe(303);
  expect(anew.headers.get('location')).not.toBe(a.headers.get('location'));
  expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(2);
});

it('undoes once for the same undo form sent twice at once (a double click)', { timeout: 60_000 }, async () => {
  const undo = (await formsOf('/data/history/restore')).find((f) => f.has('undo'))!;
  expect(undo).toBeDefined();
  const [a, b] = await Promise.all([post('/data/history/restore', undo), post('/data/history/restore', undo)]);
  expect(a.status).toBe(303);
  expect(b.headers.get('location')).toBe(a.headers.get('location'));
  expect((await history.history(DB, 'operator')).undoPoints).toHaveLength(3);
  expect(await restores()).toHaveLength(3);
});
