/// <reference lib="dom" />
/**
 * The page's one script (served as /assets/app.js, compiled by `npm run build`): live updates of
 * the approvals inbox and the CSV export's progress. It never puts text into HTML: new inbox
 * cards come from the server already escaped and are moved in as parsed nodes, and everything
 * else is set with textContent.
 */

function liveInbox(pending: HTMLElement): void {
  const status = document.getElementById('live');
  const say = (text: string) => {
    if (status) status.textContent = text;
  };
  // Only the first page (the newest calls) takes new cards in: on an older page a new call would
  // push the cards along under the reader's eyes. There the page says that new calls arrived.
  const first = (pending.dataset.page ?? '1') === '1';
  let arrived = 0;
  let refreshing = false;
  let again = false;
  const refresh = async (): Promise<void> => {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    try {
      // The page as it is shown (its pending and decided page numbers), bounded like any page.
      const res = await fetch(location.pathname + location.search, { headers: { accept: 'text/html' }, redirect: 'manual', credentials: 'same-origin' });
      // A redirect (signed out) comes back opaque under redirect: 'manual'.
      if (res.type === 'opaqueredirect' || res.status === 401) {
        location.assign('/sign-in');
        return;
      }
      if (!res.ok) return say('could not refresh');
      const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
      syncPending(pending, doc.getElementById('pending'), first);
      for (const id of ['pending-pager', 'decided-section']) {
        const theirs = doc.getElementById(id);
        const mine = document.getElementById(id);
        if (theirs && mine) mine.replaceChildren(...Array.from(theirs.childNodes).map((n) => document.importNode(n, true)));
      }
      say('live');
    } finally {
      refreshing = false;
      if (again) {
        again = false;
        void refresh();
      }
    }
  };
  const source = new EventSource('/inbox/events');
  // What changed before the stream began was sent to nobody: a run ending between the page's
  // render and this (the redirect after a decision opens a new stream; session 38, N16's "ran"
  // cell left empty), or anything while it reconnected. One fetch of the page on each start.
  source.addEventListener('ready', () => void refresh());
  source.addEventListener('approval', (e) => {
    if (!first && eventType(e) === 'approval.requested') announce(pending, ++arrived);
    void refresh();
  });
  source.addEventListener('signed-out', () => {
    source.close();
    location.assign('/sign-in');
  });
  source.onerror = () => {
    say('reconnecting…');
    // A refused stream (signed out, revoked) is not retried by the browser: the refresh finds
    // out why and goes to the sign-in page if that is it.
    if (source.readyState === EventSource.CLOSED) void refresh();
  };
}

/** The type of an approval event (`approval.requested`, `approval.decided`), if it can be read. */
function eventType(e: Event): string | undefined {
  try {
    const data = JSON.parse((e as MessageEvent<string>).data) as { type?: unknown };
    return typeof data.type === 'string' ? data.type : undefined;
  } catch {
    return undefined;
  }
}

/** On an older page: how many calls arrived since it was shown, with the way to the newest. */
function announce(pending: HTMLElement, count: number): void {
  let note = document.getElementById('pending-news');
  if (!note) {
    note = document.createElement('p');
    note.id = 'pending-news';
    note.className = 'flash ok';
    note.setAttribute('role', 'status');
    pending.before(note);
  }
  const link = document.createElement('a');
  link.href = '/inbox';
  link.textContent = 'show the newest';
  note.replaceChildren(`${count} new ${count === 1 ? 'call' : 'calls'} arrived since this page was shown: `, link);
}

/**
 * Brings the pending cards in line with the server's: new ones in, decided ones out, the rest
 * left alone, so a reason half typed into a card is not lost. `takeNew` false (an older page):
 * decided cards leave, nothing comes in.
 */
function syncPending(mine: HTMLElement, theirs: HTMLElement | null, takeNew: boolean): void {
  if (!theirs) return;
  const shown = new Set(Array.from(mine.querySelectorAll<HTMLElement>('article[data-approval]')).map((c) => c.id));
  const wanted = Array.from(theirs.querySelectorAll<HTMLElement>('article[data-approval]')).filter((c) => takeNew || shown.has(c.id));
  const ids = new Set(wanted.map((c) => c.id));
  for (const card of Array.from(mine.querySelectorAll<HTMLElement>('article[data-approval]'))) if (!ids.has(card.id)) card.remove();
  let previous: Element | null = null;
  for (const card of wanted) {
    let node = document.getElementById(card.id);
    if (!node) node = document.importNode(card, true);
    if (previous) previous.after(node);
    else mine.prepend(node);
    previous = node;
  }
  const empty = document.getElementById('no-pending');
  if (wanted.length && empty) empty.remove();
  if (!wanted.length && !empty) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.id = 'no-pending';
    p.textContent = 'Nothing is waiting for a decision.';
    mine.append(p);
  }
}

/**
 * The export with a progress bar: the CSV is read as a stream, records are counted as they
 * arrive (a line feed outside quotes ends one: RFC 4180 quoting), and the file is handed to the
 * browser once complete. The plain "Download CSV" link streams straight to disk instead.
 */
/** The error page's flash text of a refused answer, or its status when it has none. */
async function refusal(res: Response): Promise<string> {
  const doc = new DOMParser().parseFromString(await res.text().catch(() => ''), 'text/html');
  const said = doc.querySelector('.flash.error')?.textContent?.trim();
  return said ? `the export was refused: ${said}` : `the export failed (HTTP ${res.status})`;
}

function exportWithProgress(button: HTMLButtonElement): void {
  const box = document.getElementById('export-status');
  const bar = box?.querySelector('progress');
  const label = box?.querySelector('span');
  button.addEventListener('click', async () => {
    if (!box || !bar || !label) return;
    button.disabled = true;
    box.hidden = false;
    label.textContent = 'starting…';
    try {
      const res = await fetch(button.dataset.url!, { credentials: 'same-origin' });
      // A refusal is an error page (too many downloads under way, a missing table): its words,
      // not only the status, so the person knows to wait for a download to finish.
      if (!res.ok || !res.body) throw new Error(await refusal(res));
      const total = Number(res.headers.get('x-total-rows') ?? 'NaN');
      const reader = res.body.getReader();
      const parts: Uint8Array[] = [];
      const maxBytes = Number(res.headers.get('x-export-max-bytes') ?? 'NaN');
      let lines = 0;
      let quoted = false;
      let received = 0;
      for (;;) {
        // A download the server cuts off (a chunk failed, or the export reached EXPORT_MAX_BYTES)
        // breaks the stream: say so in words, and save nothing that would look complete.
        const { done, value } = await reader.read().catch(() => {
          const mb = (n: number) => `${(n / 1024 ** 2).toFixed(1)} MB`;
          const why =
            Number.isFinite(maxBytes) && received + 8 * 1024 ** 2 >= maxBytes
              ? `an export stops before ${mb(maxBytes)} (EXPORT_MAX_BYTES); export a narrower view or table`
              : 'the table changed or the server stopped it; try again';
          throw new Error(`the download was cut off after ${mb(received)}, nothing was saved: ${why}`);
        });
        if (done) break;
        received += value.length;
        parts.push(value);
        for (let i = 0; i < value.length; i++) {
          const b = value[i];
          if (b === 0x22) quoted = !quoted;
          else if (b === 0x0a && !quoted) lines++;
        }
        const rows = Math.max(0, lines - 1);
        if (Number.isFinite(total) && total > 0) bar.value = Math.min(1, rows / total);
        label.textContent = Number.isFinite(total)
          ? `${rows.toLocaleString()} of ${total.toLocaleString()} row${total === 1 ? '' : 's'}`
          : `${rows.toLocaleString()} row${rows === 1 ? '' : 's'}`;
      }
      bar.value = 1;
      const url = URL.createObjectURL(new Blob(parts as BlobPart[], { type: 'text/csv' }));
      const a = document.createElement('a');
      a.href = url;
      a.download = button.dataset.name ?? 'export.csv';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      const done = Math.max(0, lines - 1);
      label.textContent = `done: ${done.toLocaleString()} row${done === 1 ? '' : 's'}`;
    } catch (err) {
      label.textContent = err instanceof Error ? err.message : 'the export failed';
    } finally {
      button.disabled = false;
    }
  });
}

/** The drop button stays disabled until the table's name is typed exactly. */
function confirmDrop(form: HTMLFormElement): void {
  const input = form.querySelector<HTMLInputElement>('input[name=confirm]');
  const table = form.querySelector<HTMLInputElement>('input[name=table]');
  const button = form.querySelector<HTMLButtonElement>('button[type=submit]');
  if (!input || !table || !button) return;
  const check = () => (button.disabled = input.value !== table.value);
  input.addEventListener('input', check);
  check();
}

/**
 * The bulk decision's buttons work only with calls ticked, and say how many; "select all" ticks
 * the cards shown. Cards come and go with live updates, so the count follows the list.
 */
function bulkSelection(form: HTMLFormElement, pending: HTMLElement): void {
  const all = document.getElementById('select-all');
  const count = document.getElementById('selected-count');
  const buttons = Array.from(form.querySelectorAll<HTMLButtonElement>('button[name=decision]'));
  const boxes = () => Array.from(pending.querySelectorAll<HTMLInputElement>('input[name=ids]'));
  const update = () => {
    const shown = boxes();
    const ticked = shown.filter((b) => b.checked).length;
    for (const b of buttons) b.disabled = ticked === 0;
    if (count) count.textContent = ticked ? `${ticked} selected` : shown.length ? 'select all shown' : 'nothing to select';
    if (all instanceof HTMLInputElement) {
      all.hidden = shown.length === 0;
      all.checked = ticked > 0 && ticked === shown.length;
      all.indeterminate = ticked > 0 && ticked < shown.length;
    }
  };
  all?.addEventListener('change', () => {
    for (const b of boxes()) b.checked = (all as HTMLInputElement).checked;
    update();
  });
  pending.addEventListener('change', update);
  new MutationObserver(update).observe(pending, { childList: true });
  update();
}

/**
 * A form that asks for a word typed (`data-confirm`, e.g. the database a restore replaces):
 * its submit button stays disabled until the `confirm` field holds that word exactly.
 */
function confirmTyped(form: HTMLFormElement): void {
  const input = form.querySelector<HTMLInputElement>('input[name=confirm]');
  const button = form.querySelector<HTMLButtonElement>('button[type=submit]');
  if (!input || !button) return;
  const check = () => (button.disabled = input.value !== form.dataset.confirm);
  input.addEventListener('input', check);
  check();
}

document.addEventListener('DOMContentLoaded', () => {
  const pending = document.getElementById('pending');
  if (pending) liveInbox(pending);
  const bulk = document.getElementById('bulk');
  if (bulk instanceof HTMLFormElement && pending) bulkSelection(bulk, pending);
  for (const form of Array.from(document.querySelectorAll<HTMLFormElement>('form[data-confirm]'))) confirmTyped(form);
  const exporter = document.getElementById('export-progress');
  if (exporter instanceof HTMLButtonElement) exportWithProgress(exporter);
  const drop = document.getElementById('drop-form');
  if (drop instanceof HTMLFormElement) confirmDrop(drop);
});
