import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS } from '../../src/errors.ts';
import { sandbox, type Sandbox } from '../helpers/harness.ts';
import { keyedApp, type KeyedApp } from '../helpers/keyed-app.ts';

// Route input is checked by Fastify against each route's zod schema and worded by one
// formatter (src/http/route-validation.ts): every failure is a 400 INVALID_ARGUMENTS with the
// registry's envelope, naming the fields. No worker runs here: nothing invalid reaches the core.

let sb: Sandbox;
let k: KeyedApp;
const key: Record<string, string> = {};

beforeAll(async () => {
  sb = sandbox();
  // The results route exists only with a results store; a refused id never reaches it.
  k = keyedApp(sb, { results: {} as never });
  key.scout = await k.agentKey('acme', 'scout', { displayName: 'Scout', settings: { database: 'agent' } });
  key.ada = await k.memberKey('acme', 'ada', 'admin');
});
afterAll(async () => {
  await k.close();
  await sb.cleanup();
});

const as = (who: string) => ({ authorization: `Bearer ${key[who]}` });

/** The one answer every failed route schema gets, with `detail` after the registry's message. */
function expectInvalid(res: { statusCode: number; json(): unknown }, ...details: RegExp[]) {
  expect(res.statusCode).toBe(400);
  const body = res.json() as { error: { message: string } };
  expect(body).toEqual({
    error: { code: 'INVALID_ARGUMENTS', message: expect.stringMatching(/^The request or its arguments are not valid\. /), hint: ERRORS.INVALID_ARGUMENTS.hint },
  });
  for (const d of details) expect(body.error.message).toMatch(d);
}

describe('/v1/calls', () => {
  it('names each bad field of the body, the whole body when it is missing, and a bad ?wait', async () => {
    expectInvalid(
      await k.app.inject({ method: 'POST', url: '/v1/calls', headers: as('scout'), payload: { tool: '', settings: {} } }),
      /tool: Too small/,
      /Unrecognized key: "settings"/,
      /; /,
    );
    expectInvalid(await k.app.inject({ method: 'POST', url: '/v1/calls', headers: as('scout') }), /expected object/);
    expectInvalid(
      await k.app.inject({ method: 'POST', url: '/v1/calls?wait=maybe', headers: as('scout'), payload: { tool: 'DATA_DESCRIBE_SCHEMA' } }),
      /wait: Invalid option/,
    );
    // (Past 100 characters the router answers 414 before any schema: maxParamLength.)
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/calls/', headers: as('scout') }), /id: Too small/);
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/calls/c1?wait=1', headers: as('scout') }), /wait: Invalid option/);
  });

  it('checks the key before the input', async () => {
    expect((await k.app.inject({ method: 'POST', url: '/v1/calls', payload: { tool: '' } })).json().error.code).toBe('UNAUTHENTICATED');
  });
});

describe('/v1/approvals', () => {
  it('refuses a bad state, an unknown parameter, a bad limit and a bad decision', async () => {
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/approvals?state=bogus', headers: as('ada') }), /state: Invalid option/);
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/approvals?status=pending', headers: as('ada') }), /Unrecognized key: "status"/);
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/approvals?limit=0', headers: as('ada') }), /limit: Too small/);
    expectInvalid(
      await k.app.inject({ method: 'POST', url: '/v1/approvals/a1/decision', headers: as('ada'), payload: { decison: 'approve' } }),
      /decision: Invalid option/,
      /Unrecognized key: "decison"/,
    );
  });

  it('answers a good query with its defaults applied', async () => {
    const res = await k.app.inject({ method: 'GET', url: '/v1/approvals', headers: as('ada') });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ approvals: [] });
  });
});

describe('/v1/results/:id', () => {
  it('refuses an empty id', async () => {
    expectInvalid(await k.app.inject({ method: 'GET', url: '/v1/results/', headers: as('ada') }), /id: the result id is 1 to 128 characters/);
  });
});
