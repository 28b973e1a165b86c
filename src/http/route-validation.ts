import type { FastifyInstance, FastifySchemaValidationError } from 'fastify';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import { describeIssues } from '../contracts/describe-issues.ts';
import { AgentDbError } from '../errors.ts';

/**
 * Routes declare their input as zod schemas (`schema: { body, params, querystring }`); Fastify
 * compiles each once when the route is added and runs it before the handler, which receives
 * the parsed values (defaults and coercions applied) already typed through
 * `FastifyPluginAsyncZod`. A response schema, if a route ever declares one, is zod as well.
 * Set on the root instance: every route plugin inherits it.
 */
export function validateWithZod(app: FastifyInstance): void {
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.setSchemaErrorFormatter(schemaErrorFormatter);
}

/**
 * Every failed route schema, worded once: an INVALID_ARGUMENTS error whose detail names the
 * fields (see `describeIssues`). Fastify gives it status 400 and hands it to the app's error
 * handler, which answers it like any other registry error, `{ error: { code, message, hint } }`;
 * a route that must answer in its own order or form takes it from `request.validationError`
 * (`attachValidation: true`). Which part failed (`params`, `body`, `querystring`) is left out, as
 * the hand-written checks left it out: the field names say it.
 */
export function schemaErrorFormatter(errors: FastifySchemaValidationError[], _dataVar: string): AgentDbError {
  return new AgentDbError('INVALID_ARGUMENTS', describeIssues(errors.map((e) => ({ path: pathOf(e.instancePath), message: e.message ?? e.keyword }))));
}

/** `/arguments/sql` → `['arguments', 'sql']`; `/` (the input itself) → `[]`. */
function pathOf(instancePath: string): string[] {
  return instancePath.length > 1 ? instancePath.slice(1).split('/') : [];
}
