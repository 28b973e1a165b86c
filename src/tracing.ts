import { context, createTraceState, type Context, type Span, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import type { Telemetry, Span as QueueSpan } from 'bullmq';
import { BullMQOtel } from 'bullmq-otel';

// OpenTelemetry spans of a call, named after the GenAI and MCP semantic conventions. Only the
// API is used: spans go to whatever SDK the process registered, and nowhere without one.
// Tracing is off unless TRACING=on (or a client's `tracing: true`); off, each hook is one
// `undefined` check, so the hot path pays nothing. Spans carry tool names, call ids, queue and
// op names: never a statement's parameters, a call's arguments or a key.

/** The tracer's name (the instrumentation scope every agentdb span is under). */
export const TRACER_NAME = 'agentdb';

/** agentdb's tracer on the process's registered provider, or undefined when tracing is off. */
export function tracerIf(on: boolean | undefined): Tracer | undefined {
  return on ? trace.getTracer(TRACER_NAME) : undefined;
}

/** A W3C `traceparent`: version 00, trace id, parent span id, flags (https://www.w3.org/TR/trace-context/). */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/**
 * The context a caller's `traceparent` (and `tracestate`) names, for spans to continue its
 * trace; undefined for a missing or malformed one (an all-zero id is invalid too), so a bad
 * header starts a new trace rather than failing the call. Parsed here rather than by the
 * registered propagator: the API's default propagator is a no-op, and a caller's explicit
 * traceparent must be honoured whatever the process set up.
 */
export function traceparentContext(traceparent: string | undefined, tracestate?: string, base: Context = context.active()): Context | undefined {
  const m = traceparent ? TRACEPARENT.exec(traceparent.trim()) : null;
  if (!m || /^0+$/.test(m[1]!) || /^0+$/.test(m[2]!)) return undefined;
  return trace.setSpanContext(base, {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16) & 1,
    isRemote: true,
    ...(tracestate ? { traceState: createTraceState(tracestate) } : {}),
  });
}

/** A tool call's identity, as the GenAI conventions name it (`gen_ai.tool.*`). */
export interface ToolCallAttrs {
  tool: string;
  callId: string;
}

function toolAttributes({ tool, callId }: ToolCallAttrs): Record<string, string> {
  return { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool, 'gen_ai.tool.call.id': callId, 'gen_ai.tool.type': 'function' };
}

/**
 * Runs `fn` inside a span made current for it (so spans it starts, BullMQ's among them, are its
 * children), ending it when `fn` settles: an `ok: false` answer marks the span an error with the
 * answer's code as `error.type`, as a throw does with the error's name.
 */
export async function inSpan<T>(
  tracer: Tracer,
  name: string,
  opts: { kind?: SpanKind; attributes?: Record<string, string | number | boolean>; parent?: Context },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  const span = tracer.startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.attributes ? { attributes: opts.attributes } : {}) }, parent);
  try {
    const answer = await context.with(trace.setSpan(parent, span), () => fn(span));
    noteAnswer(span, answer);
    return answer;
  } catch (err) {
    span.setAttribute('error.type', (err as { code?: unknown })?.code ? String((err as { code: unknown }).code) : ((err as Error)?.name ?? 'Error'));
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span by the call answer it ended with: its error code, or where it stands. */
function noteAnswer(span: Span, answer: unknown): void {
  const a = answer as { ok?: unknown; status?: unknown; error?: { code?: unknown } } | null;
  if (!a || typeof a !== 'object' || a.ok !== false) return;
  if (typeof a.status === 'string') span.setAttribute('agentdb.call.status', a.status);
  else if (a.error?.code) {
    span.setAttribute('error.type', String(a.error.code));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
}

/** The client's span of one tool call: `execute_tool <tool>` (GenAI semantic conventions). */
export function toolCallSpan<T>(tracer: Tracer, call: ToolCallAttrs, parent: Context | undefined, fn: () => Promise<T>): Promise<T> {
  return inSpan(tracer, `execute_tool ${call.tool}`, { attributes: toolAttributes(call), ...(parent ? { parent } : {}) }, fn);
}

/**
 * The span of one db_* tool run through `db()`: `execute_tool <db_* tool>`, as the client names
 * its own spans, around the client's span of the engine tool the call became (`execute_tool
 * DATA_QUERY_SQL`), or alone for a call the surface refused before anything was sent. Its call
 * id is the answer's: a call without one of its own gets it from the client.
 */
export function dbToolSpan<T extends { callId?: unknown }>(tracer: Tracer, tool: string, parent: Context | undefined, fn: () => Promise<T>): Promise<T> {
  const attributes = { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool, 'gen_ai.tool.type': 'function' };
  return inSpan(tracer, `execute_tool ${tool}`, { attributes, ...(parent ? { parent } : {}) }, async (span) => {
    const answer = await fn();
    if (typeof answer.callId === 'string') span.setAttribute('gen_ai.tool.call.id', answer.callId);
    return answer;
  });
}

/** A worker's span running one call's job (a child of BullMQ's `process` span). */
export function runCallSpan<T>(tracer: Tracer, call: ToolCallAttrs & { shard: number }, fn: () => Promise<T>): Promise<T> {
  return inSpan(tracer, `run_call ${call.tool}`, { attributes: { ...toolAttributes(call), 'agentdb.shard': call.shard } }, fn);
}

/** The span of one request to the executor pool: its op (query, write, describe …), never its SQL. */
export function executorSpan<T>(tracer: Tracer, op: string, fn: () => Promise<T>): Promise<T> {
  return inSpan(tracer, `executor ${op}`, { kind: SpanKind.CLIENT, attributes: { 'db.system.name': 'sqlite', 'db.operation.name': op } }, fn);
}

/**
 * The wait for a person, as a span from the approval's creation to its decision (or now),
 * recorded when the woken job finds it decided: the wait spans processes and restarts, so no
 * live span could cover it.
 */
export function recordApprovalWait(
  tracer: Tracer,
  a: { id: string; state: string; createdAt: number; decidedAt?: number; tool: string; callId: string },
): void {
  tracer
    .startSpan(`await_approval ${a.tool}`, {
      startTime: a.createdAt,
      attributes: { ...toolAttributes(a), 'agentdb.approval.id': a.id, 'agentdb.approval.state': a.state },
    })
    .end(a.decidedAt ?? Date.now());
}

/** The MCP server's span of one `tools/call` (MCP semantic conventions). */
export function mcpToolCallSpan<T>(
  tracer: Tracer,
  call: { tool: string; requestId: string | number },
  parent: Context | undefined,
  fn: () => Promise<T>,
): Promise<T> {
  return inSpan(
    tracer,
    `tools/call ${call.tool}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        'mcp.method.name': 'tools/call',
        'gen_ai.tool.name': call.tool,
        'gen_ai.operation.name': 'execute_tool',
        'jsonrpc.request.id': String(call.requestId),
      },
      ...(parent ? { parent } : {}),
    },
    fn,
  );
}

/**
 * What BullMQ's own events would tell an exporter and a span must not: a job's result (the
 * call's envelope: a read's rows, which hold its parameters and stored values) and a failure's
 * message (SQLite's messages quote statements and values).
 */
const UNTOLD_QUEUE_ATTRIBUTES = new Set(['bullmq.job.result', 'bullmq.job.failed.reason']);

/**
 * BullMQ's telemetry (bullmq-otel, tracer `agentdb`) for the queues and workers, with the job's
 * result and failure text kept out of its spans: its `job completed` event otherwise carries the
 * whole envelope, and `job failed` and `recordException` the error's message.
 */
export function queueTelemetry(): Telemetry {
  const otel = new BullMQOtel(TRACER_NAME);
  const tracer = otel.tracer;
  return {
    contextManager: otel.contextManager,
    tracer: {
      startSpan(name, options, ctx): QueueSpan {
        const span = tracer.startSpan(name, options, ctx);
        return {
          setSpanOnContext: (c) => span.setSpanOnContext(c),
          setAttribute: (key, value) => {
            if (!UNTOLD_QUEUE_ATTRIBUTES.has(key)) span.setAttribute(key, value);
          },
          setAttributes: (attributes) => span.setAttributes(kept(attributes)),
          addEvent: (event, attributes) => span.addEvent(event, attributes && kept(attributes)),
          // The exception's kind, never its message.
          recordException: (exception) =>
            span.recordException(
              typeof exception === 'string' ? 'Error' : { name: exception.name ?? 'Error', ...(exception.code !== undefined ? { code: exception.code } : {}) },
            ),
          end: () => span.end(),
        };
      },
    },
  };
}

function kept<A extends Record<string, unknown>>(attributes: A): A {
  if (!Object.keys(attributes).some((k) => UNTOLD_QUEUE_ATTRIBUTES.has(k))) return attributes;
  return Object.fromEntries(Object.entries(attributes).filter(([k]) => !UNTOLD_QUEUE_ATTRIBUTES.has(k))) as A;
}
