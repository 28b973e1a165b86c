// Module hook: the conformance package's `fs` is fs plus a globSync (see register.mjs).
const SHIM = new URL('./fs-with-glob.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/@modelcontextprotocol/conformance/')) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
