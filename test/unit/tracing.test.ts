import { ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { describe, expect, it } from 'vitest';
import { tracerIf, traceparentContext } from '../../src/tracing.ts';

const spanOf = (tp: string | undefined, ts?: string) => {
  const ctx = traceparentContext(tp, ts, ROOT_CONTEXT);
  return ctx ? trace.getSpanContext(ctx) : undefined;
};

describe('traceparentContext', () => {
  it("continues a caller's W3C traceparent, sampled or not, with its tracestate", () => {
    expect(spanOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'vendor=a1')).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
      traceFlags: 1,
      isRemote: true,
    });
    expect(spanOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'vendor=a1')?.traceState?.get('vendor')).toBe('a1');
    expect(spanOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00')?.traceFlags).toBe(0);
  });

  it.each([
    undefined,
    '',
    'garbage',
    '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
    '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
    '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra',
  ])('starts a new trace for %j', (tp) => {
    expect(traceparentContext(tp, undefined, ROOT_CONTEXT)).toBeUndefined();
  });
});

describe('tracerIf', () => {
  it('asks for no tracer at all when tracing is off', () => {
    expect(tracerIf(false)).toBeUndefined();
    expect(tracerIf(undefined)).toBeUndefined();
    expect(tracerIf(true)).toBeDefined();
  });
});
