/**
 * The page's stylesheet, served at `/assets/app.css`. Kept as a module (not a .css file) so tsc
 * carries it into dist/ with everything else: nothing to copy, nothing else to build.
 */
export const STYLES = `
:root { --fg:#1b1f24; --muted:#5b6470; --bg:#fff; --line:#d7dce2; --accent:#0b5fd1; --ok:#176a2f; --bad:#a4161a; --soft:#f4f6f8; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid #f5a700; outline-offset: 2px; }
.skip { position: absolute; left: -999px; } .skip:focus { left: 8px; top: 8px; background: #fff; padding: 4px 8px; z-index: 9; }
.top { display: flex; flex-wrap: wrap; gap: 8px 20px; align-items: center; padding: 10px 16px; border-bottom: 1px solid var(--line); background: var(--soft); }
.brand { font-weight: 700; text-decoration: none; color: var(--fg); }
.top nav { display: flex; gap: 14px; } .top nav a[aria-current=page] { font-weight: 700; text-decoration: none; color: var(--fg); }
.who { margin-left: auto; display: flex; gap: 10px; align-items: center; color: var(--muted); }
.who form { margin: 0; }
main { padding: 16px; max-width: 1200px; margin: 0 auto; }
h1 { font-size: 1.4rem; margin: 0 0 12px; } h2 { font-size: 1.1rem; margin: 24px 0 8px; }
button, .button { font: inherit; padding: 6px 12px; border: 1px solid var(--line); border-radius: 6px; background: #fff; color: var(--fg); cursor: pointer; text-decoration: none; display: inline-block; }
/* The page's own display rules would otherwise show elements marked hidden (a form's disabled default button). */
[hidden] { display: none !important; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.danger { background: var(--bad); border-color: var(--bad); color: #fff; }
button.link { border: 0; background: none; color: var(--accent); padding: 0; text-decoration: underline; }
button:disabled { opacity: .5; cursor: not-allowed; }
input, select, textarea { font: inherit; padding: 5px 8px; border: 1px solid var(--line); border-radius: 6px; max-width: 100%; }
label { display: inline-flex; gap: 6px; align-items: center; }
.flash { padding: 8px 12px; border-radius: 6px; } .flash.ok { background: #e6f4ea; color: var(--ok); } .flash.error { background: #fdecea; color: var(--bad); }
.flash small.code { font-family: ui-monospace, monospace; font-size: 0.8em; opacity: 0.75; margin-left: 4px; }
.muted { color: var(--muted); } .empty { color: var(--muted); padding: 16px; border: 1px dashed var(--line); border-radius: 6px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 12px; margin: 0 0 12px; }
.card header { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: baseline; margin-bottom: 8px; }
.tier { font-size: .8rem; padding: 1px 6px; border-radius: 10px; background: var(--soft); border: 1px solid var(--line); }
.tier.destructive { background: #fdecea; border-color: #f3b7b3; }
pre.sql { background: var(--soft); padding: 8px; border-radius: 6px; white-space: pre-wrap; word-break: break-word; margin: 6px 0; }
.sql-k { color: #8a2be2; font-weight: 600; } .sql-s { color: #176a2f; } .sql-n { color: #b35900; } .sql-c { color: var(--muted); font-style: italic; } .sql-p { color: #0b5fd1; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 6px 0; } dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; word-break: break-word; }
.decide { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-top: 8px; }
.decide input[name=reason] { flex: 1 1 220px; }
table.grid, table.list { border-collapse: collapse; width: 100%; }
.scroll { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; }
table.grid th, table.grid td, table.list th, table.list td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
table.grid td { font-family: ui-monospace, monospace; font-size: .9rem; white-space: pre-wrap; max-width: 40ch; overflow-wrap: anywhere; }
table.grid th a { text-decoration: none; }
td.null { color: var(--muted); font-style: italic; }
.pager { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin: 10px 0; }
.pager form { display: flex; gap: 6px; align-items: center; margin: 0; }
.progress { margin-top: 6px; }
.signin { max-width: 420px; margin: 40px auto; } .signin form { display: grid; gap: 10px; } .signin input { width: 100%; }
/* The consent page's choices: a radio beside its text (.signin's full-width inputs would stretch it into a column of its own). */
.grant-level { display: grid; gap: 8px; } .grant-level label { display: flex; align-items: baseline; gap: 8px; } .signin .grant-level input { width: auto; flex: none; }
.unverified { background: #fff6dd; border-radius: 6px; padding: 8px 12px; }
.danger-zone { border: 1px solid #f3b7b3; border-radius: 8px; padding: 12px; margin-top: 24px; }
.bad { color: var(--bad); } tr.damaged td { background: #fdecea; }
.live { font-size: .85rem; }
.cut { font-size: .85rem; margin: 2px 0 6px; } .card header .own { margin-left: auto; }
.effect { margin: 6px 0; } .effect-cut { font-size: .85rem; margin: 2px 0 6px; } .effect-counts { margin: 4px 0; padding-left: 18px; }
.added, td.added, ins { background: #e6f4ea; text-decoration: none; } .removed, td.removed, del { background: #fdecea; }
td.changed { background: #fff6dd; } table.diff tr.delete td { text-decoration: line-through; } table.diff th[title] { width: 1.5em; }
ol.activity { list-style: none; padding: 0; margin: 0; } .entry.outside { border-style: dashed; } .entry.restore { background: var(--soft); }
.entry-actions { display: inline-block; margin: 4px 16px 0 0; vertical-align: top; } .entry-actions[open] { display: block; } #history-details { margin-top: 24px; }
@media (max-width: 640px) { main { padding: 10px; } .who { margin-left: 0; } dl.facts { grid-template-columns: 1fr; } table.list .opt { display: none; } }
`;
