import { readFileSync } from 'node:fs';

/**
 * The `npx agentdb …` commands of the sh blocks under one heading of a page of the repository
 * (`README.md`, `docs/calls.md`), as argument lists: what a new user copies, word for word.
 * `heading` is the whole line (`## Call a tool`, `### An MCP client`); the section ends at the
 * next heading of its level or above.
 */
export function commandsOf(page: string, heading: string): string[][] {
  const lines = readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8').split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`${page} has no heading ${heading}`);
  const level = heading.indexOf(' ');
  // A `# …` line inside a code block is a comment, not a heading.
  let end = start + 1;
  for (let fenced = false; end < lines.length; end++) {
    if (lines[end]!.startsWith('```')) fenced = !fenced;
    else if (!fenced && new RegExp(`^#{1,${level}} `).test(lines[end]!)) break;
  }
  const text = lines.slice(start, end).join('\n') + '\n';
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, ' '));
  return blocks
    .flatMap((b) => b.split('\n'))
    .filter((line) => line.startsWith('npx agentdb '))
    .map((line) => words(line).slice(2));
}

/** Splits a shell line the way sh does for what the docs use: spaces, single or double quotes, and a `# comment`. */
function words(line: string): string[] {
  const out: string[] = [];
  for (const m of line.matchAll(/'([^']*)'|"([^"]*)"|(\S+)/g)) {
    if (m[3]?.startsWith('#')) break;
    out.push(m[1] ?? m[2] ?? m[3]!);
  }
  return out;
}
