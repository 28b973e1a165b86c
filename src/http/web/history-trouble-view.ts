import type { HistoryView } from '../../shards/history-client.ts';
import { html, type Html } from './html.ts';
import { isoTime } from './layout.ts';

const when = (t: string | null | undefined) => (t === null || t === undefined ? '—' : isoTime(Date.parse(t)));

/**
 * What `agentdb history` marks, before anyone picks a moment: stretches no restore reaches
 * (their commits never reached history; restores there answer HISTORY_LOST) and generations
 * whose segments are damaged (restores that need them answer HISTORY_CORRUPT). The page said
 * nothing of either, so a person saw a whole range and met the refusal only on a dry run.
 */
export function troubleView(h: HistoryView): Html {
  const lost = h.lost ?? [];
  const damaged = h.generations.filter((g) => g.damaged);
  if (!lost.length && !damaged.length) return html``;
  return html`<section class="card danger-zone" id="history-trouble" role="alert">
${
  lost.length
    ? html`<h2>Lost stretches</h2>
<p>No restore reaches these stretches: commits made in them never reached history. A restore or dry run to a moment inside one is refused (HISTORY_LOST); pick a moment outside.</p>
<div class="scroll"><table class="list" id="lost"><thead><tr><th>after</th><th>before</th><th>gap generation</th></tr></thead><tbody>
${lost.map((l) => html`<tr><td>${when(l.after)}</td><td>${when(l.before)}</td><td>${l.generation}</td></tr>`)}
</tbody></table></div>`
    : ''
}
${
  damaged.length
    ? html`<h2>Damaged history</h2>
<p>These generations have a damaged segment: a restore that needs it is refused (HISTORY_CORRUPT), and backups leave it out.</p>
<ul id="damaged">${damaged.map((g) => html`<li><strong>${g.id}</strong>: ${g.damaged}</li>`)}</ul>`
    : ''
}
</section>`;
}
