import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { REPO, repoText } from '../helpers/repo-files.ts';

// STYLE.md: "Exported functions and types carry TSDoc." What the package exports is what a
// runtime's author reads in an editor's hover: package.json's `exports` (the root and the three
// framework entries). Kept by this check, not by review: every name each entry exports, followed
// through its re-exports to the declaration, carries a TSDoc comment, and so does every public
// member of an exported class (its methods are the client's API) and every field of an exported
// interface or object type (what a caller reads off an answer, an option it sets, a Config entry:
// its meaning and units are in the hover, not only in docs/). A field declared outside the repo
// (a framework's own type) is that package's; fields of fields are left to their field's comment.

/** The files behind package.json's `exports`, as source. */
function entryFiles(): string[] {
  const exportsField = JSON.parse(repoText('package.json')).exports as Record<string, { default: string }>;
  return Object.values(exportsField).map((e) => e.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
}

const DOC_FREE_MODIFIERS = new Set([ts.SyntaxKind.PrivateKeyword, ts.SyntaxKind.ProtectedKeyword]);

/** `entry: name` (or `entry: Class.member`) for each export of `entries` without TSDoc. */
function undocumented(entries: string[]): { missing: string[]; seen: number } {
  const program = ts.createProgram(
    entries.map((e) => path.join(REPO, e)),
    {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      allowImportingTsExtensions: true,
      noEmit: true,
      strict: true,
      skipLibCheck: true,
      types: ['node'],
    },
  );
  const checker = program.getTypeChecker();
  const doc = (s: ts.Symbol) => ts.displayPartsToString(s.getDocumentationComment(checker)).trim();
  const missing: string[] = [];
  let seen = 0;
  for (const entry of entries) {
    const module = checker.getSymbolAtLocation(program.getSourceFile(path.join(REPO, entry))!)!;
    for (const exported of checker.getExportsOfModule(module)) {
      seen++;
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!doc(exported) && !doc(target)) missing.push(`${entry}: ${exported.name}`);
      if (target.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
        missing.push(...bareFields(checker.getDeclaredTypeOfSymbol(target)).map((field) => `${entry}: ${exported.name}.${field}`));
        continue;
      }
      if (!(target.flags & ts.SymbolFlags.Class)) continue;
      for (const member of checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(target))) {
        const decl = member.valueDeclaration ?? member.declarations?.[0];
        if (!decl || member.name.startsWith('#')) continue;
        const modifiers = ts.canHaveModifiers(decl) ? (ts.getModifiers(decl) ?? []) : [];
        if (modifiers.some((m) => DOC_FREE_MODIFIERS.has(m.kind))) continue;
        if (!doc(member)) missing.push(`${entry}: ${exported.name}.${member.name}`);
      }
    }
  }
  return { missing, seen };

  /** Fields of `type` (each member of a union apart) declared in the repo without TSDoc, each once. */
  function bareFields(type: ts.Type): string[] {
    const bare = new Set<string>();
    for (const part of type.isUnion() ? type.types : [type])
      for (const field of checker.getPropertiesOfType(part)) {
        const decl = field.declarations?.[0];
        if (!decl || decl.getSourceFile().fileName.includes('/node_modules/')) continue;
        if (!doc(field)) bare.add(field.name);
      }
    return [...bare];
  }
}

describe('what the package exports carries TSDoc', () => {
  it('finds a name without TSDoc, through a re-export, on a public class member and on a field', () => {
    const sample = 'test/unit/export-docs-sample/entry.ts';
    const { missing } = undocumented([sample]);
    expect(missing.sort()).toEqual(
      [
        `${sample}: bare`,
        `${sample}: Documented.bareMethod`,
        `${sample}: DocumentedAlias.bareMethod`,
        `${sample}: Shape.bareField`,
        `${sample}: Either.bareInOne`,
        `${sample}: Widened.bareField`,
        `${sample}: Widened.bareAdded`,
      ].sort(),
    );
  });

  it("leaves no export of package.json's entries without it", () => {
    const entries = entryFiles();
    expect(entries).toContain('src/index.ts');
    const { missing, seen } = undocumented(entries);
    expect(seen).toBeGreaterThan(30);
    expect(missing).toEqual([]);
  }, 60_000);
});
