import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { repoText, tsFiles } from '../helpers/repo-files.ts';

// STYLE.md: "One config object, validated once at the entry point and passed down; nothing runs
// on import." A module that starts something, reads a file or the environment, or waits when it
// is imported does so in every process and test that imports it, before any config exists and
// in an order nobody chose. Kept by this check, not by review: the top level of every module of
// src/ (what runs on import) holds only imports, exports and declarations, and what its
// constants are made of calls nothing that reaches outside the process's memory.

/** Modules whose import is their start, each with why. */
const ENTRIES: Record<string, string> = {
  'src/executor/executor-child.ts': "the executor child process's entry: forked as a file (executor-spawn.ts), so importing it is starting it",
  'src/http/web/browser/app.ts': "the web page's script: run by the browser (bundled by assets.ts), it waits for the page to load",
  'src/frameworks/ai-sdk.ts': 'a framework adapter (agentdb/ai-sdk) loads its optional peer framework when imported, on purpose (loadFramework)',
  'src/frameworks/openai-agents.ts': 'a framework adapter (agentdb/openai-agents), as ai-sdk.ts',
  'src/frameworks/langchain.ts': 'a framework adapter (agentdb/langchain), as ai-sdk.ts',
};

/** Calls that reach outside memory: files, the environment, processes, timers, connections. */
const EFFECT_CALL =
  /^(?:process\.(?!platform\b|arch\b)|fs\.|child_process\.|os\.(?:tmpdir|homedir|hostname|networkInterfaces)\b|(?:setTimeout|setInterval|setImmediate|queueMicrotask|fork|spawn|spawnSync|exec|execSync|execFile|execFileSync)$)/;
/** Constructors that start something: a thread, a connection, a queue, a server. */
const EFFECT_NEW = /^(?:Worker|Redis|Queue|QueueEvents|Server|Socket)$/;

/** What in `source`'s top level runs on import and reaches outside memory: `line: text` each. */
function importEffects(file: string, source: string): string[] {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const say = (node: ts.Node, why: string) =>
    found.push(`${sf.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${why}: ${node.getText().split('\n')[0]!.slice(0, 80)}`);
  /** Walks what runs when `node` is evaluated at the top level, not into functions run later. */
  const runs = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && !ts.isClassStaticBlockDeclaration(node)) return;
    if (ts.isClassLike(node)) {
      // A class's static fields and blocks run when it is defined; the rest when it is used.
      for (const member of node.members) {
        if (ts.isClassStaticBlockDeclaration(member)) say(member, 'a static block');
        else if (ts.isPropertyDeclaration(member) && member.initializer && member.modifiers?.some((m) => m.kind === ts.SyntaxKind.StaticKeyword))
          runs(member.initializer);
      }
      return;
    }
    if (ts.isAwaitExpression(node)) say(node, 'a top-level await');
    else if (ts.isCallExpression(node) && EFFECT_CALL.test(node.expression.getText())) say(node, 'a call outside memory');
    else if (ts.isNewExpression(node) && EFFECT_NEW.test(node.expression.getText())) say(node, 'a start');
    else if (ts.isPropertyAccessExpression(node) && node.getText() === 'process.env') say(node, 'the environment read');
    ts.forEachChild(node, runs);
  };
  for (const statement of sf.statements) {
    if (ts.isImportDeclaration(statement) || ts.isImportEqualsDeclaration(statement) || ts.isExportDeclaration(statement)) continue;
    if (ts.isInterfaceDeclaration(statement) || ts.isTypeAliasDeclaration(statement) || ts.isModuleDeclaration(statement)) continue;
    if (ts.isFunctionDeclaration(statement)) continue;
    if (ts.isClassDeclaration(statement) || ts.isEnumDeclaration(statement) || ts.isVariableStatement(statement) || ts.isExportAssignment(statement)) {
      runs(statement);
      continue;
    }
    say(statement, 'a statement run on import');
  }
  return found;
}

describe('nothing runs on import', () => {
  it('finds each kind of effect (so the check below checks something)', () => {
    const source = [
      "import fs from 'node:fs';",
      'main();',
      "const a = fs.readFileSync('/etc/hostname');",
      'const b = process.env.X;',
      'const c = await load();',
      "const d = new Worker('x.js');",
      'export class E { static f = setInterval(() => undefined, 10); static { go(); } }',
      'if (a) go();',
      // Not effects: functions run later, constants made in memory, process.platform.
      'export function g() { return fs.readFileSync(process.env.Y!); }',
      'const h = new Map([[1, 2]]);',
      "const i = process.platform === 'linux';",
      'const j = () => setTimeout(go, 1);',
      'class K { x = process.env.Z; m() { main(); } }',
    ].join('\n');
    expect(importEffects('sample.ts', source).map((f) => f.split(':')[0])).toEqual(['2', '3', '4', '5', '6', '7', '7', '8']);
  });

  it('holds only imports, exports and declarations at the top of every module of src/ but the entries named', () => {
    const found: string[] = [];
    for (const file of tsFiles('src')) {
      if (ENTRIES[file] || file.endsWith('.d.ts')) continue;
      for (const effect of importEffects(file, repoText(file))) found.push(`${file}:${effect}`);
    }
    expect(found).toEqual([]);
  });

  it('names only entries that exist and still run something on import', () => {
    for (const file of Object.keys(ENTRIES)) expect(importEffects(file, repoText(file)), file).not.toEqual([]);
  });
});
