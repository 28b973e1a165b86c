// The folder order of ARCHITECTURE.md, checked by `npm run depcheck` (in .ci/run): a folder may
// import the folders before it in LAYERS, never one after it, so no cycle between folders can
// form. Types count too (tsPreCompilationDeps): a type import ties two layers as much as a call.
// Where the order differs from DESIGN.md "Layout", ARCHITECTURE.md says why.

/** Bottom first. Each entry is one layer; a layer is one folder of src/ or a few root files. */
const LAYERS = [
  // config.ts joins the parts of its one schema, src/config/*.ts, which sit in its layer.
  { name: 'base', path: '^src/((errors|config|logger|metrics|tracing)\\.ts$|config/)' },
  { name: 'contracts', path: '^src/contracts/' },
  { name: 'redis', path: '^src/redis/' },
  { name: 'registry', path: '^src/registry/' },
  { name: 'oauth', path: '^src/oauth/' },
  { name: 'guard', path: '^src/guard/' },
  { name: 'policy', path: '^src/policy/' },
  { name: 'sqlite', path: '^src/sqlite/' },
  { name: 'blobs', path: '^src/blobs/' },
  { name: 'history', path: '^src/history/' },
  { name: 'executor', path: '^src/executor/' },
  { name: 'approvals', path: '^src/approvals/' },
  { name: 'calls', path: '^src/calls/' },
  { name: 'shards', path: '^src/shards/' },
  { name: 'schedule', path: '^src/schedule/' },
  { name: 'doctor', path: '^src/doctor/' },
  { name: 'mcp', path: '^src/mcp/' },
  // The framework adapters (agentdb/ai-sdk, …): over the client, formatting answers as MCP does.
  { name: 'frameworks', path: '^src/frameworks/' },
  { name: 'http', path: '^src/http/' },
  { name: 'cli', path: '^src/cli/' },
  // The package's entry (the client library's exports) and the process entry points.
  { name: 'entry', path: '^(src/index\\.ts$|workers/|bin/)' },
];

const layerRules = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `layer-${layer.name}`,
  comment: `${layer.name} may use only the layers before it: ${LAYERS.slice(0, i).map((l) => l.name).join(', ') || 'none'}`,
  severity: 'error',
  from: { path: layer.path },
  to: { path: LAYERS.slice(i + 1).map((l) => `(${l.path})`).join('|') },
}));

/** Every layer's path at once: a module of src/ that none of them matches is in no layer. */
const IN_A_LAYER = LAYERS.map((l) => `(${l.path})`).join('|');

/**
 * The adapters (DESIGN.md "Layout": parse, call the core, format). One uses another only to serve
 * or start it, in these files: HTTP serves MCP (mcp-routes.ts, and its fast path), the CLI starts
 * the HTTP server and a worker's metrics (start.ts, worker.ts) and serves MCP over stdio (mcp.ts),
 * and the framework tools answer a model as MCP does (agent-toolset.ts). Anywhere else an adapter
 * borrowing another's parsing or wording is a rule that belongs below both.
 */
const ADAPTERS = ['mcp', 'frameworks', 'http', 'cli'];
const COMPOSING = '^src/(http/mcp-(routes|fast-call)|cli/(start|worker|mcp)|frameworks/agent-toolset)\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'in-a-layer',
      comment: 'Every module of src/ is in a layer of LAYERS: a new folder (or root file) gets its place in the order first.',
      severity: 'error',
      from: { path: '^src/', pathNot: IN_A_LAYER },
      to: {},
    },
    {
      name: 'to-a-layer',
      comment: 'Nothing imports a module of src/ that is in no layer (one without imports of its own escapes in-a-layer).',
      severity: 'error',
      from: {},
      to: { path: '^src/', pathNot: IN_A_LAYER },
    },
    ...ADAPTERS.map((adapter) => ({
      name: `adapter-${adapter}-alone`,
      comment: `${adapter} uses no other adapter (${ADAPTERS.filter((a) => a !== adapter).join(', ')}), but to serve or start it (COMPOSING)`,
      severity: 'error',
      from: { path: `^src/${adapter}/`, pathNot: COMPOSING },
      to: { path: `^src/(${ADAPTERS.filter((a) => a !== adapter).join('|')})/` },
    })),
    {
      name: 'adapters-open-no-database',
      // DESIGN.md "One owner per shard": only the owner opens a database's files; the HTTP server,
      // MCP, the framework tools and the CLI reach one through a job on its shard's queue, which
      // is what lets them run on another host. So no adapter imports better-sqlite3, the executor
      // or the one-file layer (sqlite/) but for types; the Data page words sqlite-figures.ts's
      // row-count cap, a number, which is the one exception.
      comment: 'An adapter (mcp, frameworks, http, cli) opens no database: no better-sqlite3, no src/executor/ or src/sqlite/ but types.',
      severity: 'error',
      from: { path: `^src/(${ADAPTERS.join('|')})/` },
      to: {
        path: '^src/(executor|sqlite)/|(^|/)node_modules/better-sqlite3/',
        pathNot: '^src/sqlite/sqlite-figures\\.ts$',
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'entry-points-only',
      comment: 'workers/ and bin/ are process entry points only: each calls src/cli/main.ts and nothing else of src/.',
      severity: 'error',
      from: { path: '^(workers|bin)/' },
      to: { path: '^src/', pathNot: '^src/cli/main\\.ts$' },
    },
    {
      name: 'no-circular',
      // Between folders the layer rules already forbid any cycle. Within a folder, a cycle that
      // passes through a type-only import is erased by the compiler and cannot change the order
      // modules load in (shard-ops.ts and its op handlers share their types that way); a cycle
      // of imports that run is an error anywhere.
      comment: 'No cycle of runtime imports between modules.',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'not-to-unresolvable',
      comment: 'An import the checker cannot resolve is one it cannot judge.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-dev-deps-in-src',
      comment: 'What ships (src, workers, bin) runs without devDependencies.',
      severity: 'error',
      // assets.ts loads the TypeScript compiler only when run from the sources (tests, tsx),
      // where the built browser script is absent; a built package never reaches that import.
      from: { path: '^(src|workers|bin)/', pathNot: '^src/http/web/assets\\.ts$' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.js', '.json'],
    },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
