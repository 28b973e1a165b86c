import type { Member } from '../../registry/members.ts';
import { html, type Html } from './html.ts';

/** What every page's frame shows: the title, the signed-in member (if any) and the CSRF token. */
export interface PageFrame {
  title: string;
  member?: Member;
  csrf?: string;
  /** Which nav entry is current. */
  nav?: 'inbox' | 'data' | 'apps';
  /** A one-line notice above the content (a decision made, an error). */
  flash?: { kind: 'ok' | 'error'; text: string | Html };
}

/**
 * The page shell. Scripts and styles are separate files (the CSP admits no inline script or
 * style); the CSRF token is in a meta tag for the script's own POSTs.
 */
export function layout(frame: PageFrame, content: Html): Html {
  const { member } = frame;
  const current = (n: string) => (frame.nav === n ? html` aria-current="page"` : '');
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${frame.csrf ? html`<meta name="csrf-token" content="${frame.csrf}">` : ''}
<title>${frame.title} · agentdb</title>
<link rel="stylesheet" href="/assets/app.css">
<script type="module" src="/assets/app.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/">agentdb</a>
  ${
    member
      ? html`<nav aria-label="Main">
    <a href="/inbox"${current('inbox')}>Approvals</a>
    <a href="/data"${current('data')}>Data</a>
    <a href="/apps"${current('apps')}>Connected apps</a>
  </nav>
  <div class="who">
    <span>${member.name} · ${member.workspace}${member.role === 'admin' ? ' · admin' : ''}</span>
    <form method="post" action="/sign-out"><input type="hidden" name="_csrf" value="${frame.csrf}"><button type="submit" class="link">Sign out</button></form>
  </div>`
      : ''
  }
</header>
<main id="main" tabindex="-1">
${frame.flash ? html`<p class="flash ${frame.flash.kind}" role="${frame.flash.kind === 'error' ? 'alert' : 'status'}">${frame.flash.text}</p>` : ''}
${content}
</main>
</body>
</html>`;
}

/** A relative age such as `3 min ago` or `in 2 h`; under half a second either way, `just now`. */
export function relative(ms: number, now = Date.now()): string {
  const d = Math.round((ms - now) / 1000);
  // Rounded to 0 s, the sign said nothing and read "in 0 s" for what had just happened.
  if (d === 0) return 'just now';
  const a = Math.abs(d);
  const text = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return d < 0 ? `${text} ago` : `in ${text}`;
}

/**
 * When something happened, such as `3 min ago`: a time ahead of `now` (another process's clock a
 * little ahead) reads `just now`, never `in 2 s` for what is already done.
 */
export function ago(ms: number, now = Date.now()): string {
  return ms >= now ? 'just now' : relative(ms, now);
}

/** A timestamp as UTC ISO text, second precision. */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
